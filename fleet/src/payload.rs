//! The JSON payloads on the fleet's topics. Each carries `version` (1
//! now): a reader takes its own version and older ones and refuses newer
//! ones by name; fields it does not know are ignored, so a minor addition
//! needs no new version.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The payload version this build writes and the newest it reads.
pub const PAYLOAD_VERSION: u32 = 1;

/// Why a payload cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error("payload is not valid JSON of the expected shape: {0}")]
    Shape(String),
    #[error("payload version {0} is newer than the {PAYLOAD_VERSION} this build reads")]
    TooNew(u32),
}

#[derive(Deserialize)]
struct VersionProbe {
    version: u32,
}

/// Reads a payload, checking its version first so a newer one is named as such.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, PayloadError> {
    let probe: VersionProbe = serde_json::from_slice(bytes).map_err(|e| PayloadError::Shape(e.to_string()))?;
    if probe.version > PAYLOAD_VERSION {
        return Err(PayloadError::TooNew(probe.version));
    }
    serde_json::from_slice(bytes).map_err(|e| PayloadError::Shape(e.to_string()))
}

/// Writes a payload.
pub fn encode<T: Serialize>(payload: &T) -> Vec<u8> {
    serde_json::to_vec(payload).expect("fleet payloads are plain data")
}

/// `fleet/<vehicle>/desired`: the manifest the vehicle shall run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Desired {
    pub version: u32,
    /// Unique per rollout; the vehicle applies each id at most once.
    pub rollout_id: String,
    /// An Ankaios manifest (YAML), as `ank apply` takes it.
    pub manifest: String,
    /// The vehicle the message is signed for (empty when unsigned).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vehicle: String,
    /// The operator's sequence number for this vehicle; it only grows, so
    /// a replayed older message is refused (0 when unsigned).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: u64,
    /// The operator's Ed25519 signature (base64) of the fields above
    /// ([`crate::signing::signed_bytes`]); empty when unsigned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Desired {
    /// A message without signature (for connectors run with `--allow-unsigned`).
    pub fn unsigned(rollout_id: &str, manifest: &str) -> Self {
        Self {
            version: PAYLOAD_VERSION,
            rollout_id: rollout_id.to_owned(),
            manifest: manifest.to_owned(),
            vehicle: String::new(),
            seq: 0,
            signature: String::new(),
        }
    }
}

/// What became of the latest desired message a vehicle handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RolloutResult {
    /// The vehicle's desired state holds it (now or since earlier).
    Applied,
    /// Refused as a whole; nothing changed.
    Rejected,
}

/// The rollout a status is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    pub id: String,
    pub result: RolloutResult,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The apply job of the applied rollout, as the vehicle's server reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub id: u64,
    /// `Progressing`, `Succeeded`, `Failed`, ... (`ank get jobs`' words).
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// One workload the fleet manages on the vehicle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    pub agent: String,
    /// Execution state and sub-state as `ank get workloads` shows them.
    pub state: String,
    pub sub_state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub additional_info: String,
    pub generation: u64,
    pub observed_generation: u64,
    pub ready: bool,
    pub available: bool,
    /// Why the vehicle's server put the last healthy spec back after this
    /// workload's gated update (`update.autoRevert`); empty when it did not.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reverted: String,
}

/// `fleet/<vehicle>/status` (retained).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub version: u32,
    pub vehicle: String,
    /// Counts up with every status this connector run publishes.
    pub seq: u64,
    /// RFC 3339.
    pub published_at: String,
    /// The latest desired message handled, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The rollout the vehicle's desired state carries (its ledger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_rollout: Option<String>,
    /// The highest sequence number of a signed desired message the vehicle
    /// accepted: the operator signs the next one above it (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub accepted_seq: u64,
    /// The apply job of the applied rollout, while the server keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobStatus>,
    /// Every managed workload is Ready (false when there are none).
    pub ready: bool,
    /// Every managed workload is Available (false when there are none).
    pub available: bool,
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadStatus>,
}

impl Status {
    /// The status without the fields that change with every publication,
    /// to tell whether anything worth publishing changed.
    pub fn content_eq(&self, other: &Status) -> bool {
        self.rollout == other.rollout
            && self.applied_rollout == other.applied_rollout
            && self.job == other.job
            && self.accepted_seq == other.accepted_seq
            && self.ready == other.ready
            && self.available == other.available
            && self.workloads == other.workloads
    }
}

/// `fleet/<vehicle>/info` (retained): what the vehicle says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Info {
    pub version: u32,
    pub vehicle: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The connector's version.
    #[serde(default)]
    pub connector: String,
}

/// `fleet/<vehicle>/online` (retained; the Last Will says `false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Online {
    pub version: u32,
    pub online: bool,
}

/// One workload event with its count, as the vehicle's server merged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub workload: String,
    pub agent: String,
    pub kind: String,
    pub reason: String,
    pub count: u64,
    pub first_seen: String,
    pub last: String,
}

/// `fleet/<vehicle>/events`: the events that are new or counted up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Events {
    pub version: u32,
    pub vehicle: String,
    pub events: Vec<Event>,
}

/// Where a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RolloutPhase {
    Progressing,
    Halted,
    Succeeded,
}

/// `fleet/rollouts/<id>` (retained): the plan and progress of a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRecord {
    pub version: u32,
    pub id: String,
    pub manifest: String,
    pub selector: String,
    /// The vehicles of each wave, in order.
    pub waves: Vec<Vec<String>>,
    /// How many vehicles may fail in all before the rollout halts.
    pub max_failures: usize,
    /// How long each wave may take to become Ready, in seconds.
    pub wave_timeout_secs: u64,
    /// How many waves are done.
    pub waves_done: usize,
    pub phase: RolloutPhase,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Vehicles that failed, with why.
    #[serde(default)]
    pub failed: BTreeMap<String, String>,
    pub started_at: String,
    pub updated_at: String,
}

/// What an operator asks of a running rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RolloutAction {
    Halt,
    Resume,
}

/// `fleet/rollouts/<id>/control` (retained).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutControl {
    pub version: u32,
    pub action: RolloutAction,
}

/// Now, as RFC 3339.
pub fn now() -> String {
    ank_common::timestamp::rfc3339_utc(ank_common::daemon::clock::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_and_a_newer_version_is_named() {
        let d = Desired::unsigned("r1", "apiVersion: v1\n");
        assert_eq!(decode::<Desired>(&encode(&d)).unwrap(), d);
        assert_eq!(decode::<Desired>(br#"{"version":2,"rolloutId":"r","manifest":""}"#), Err(PayloadError::TooNew(2)));
        let text = decode::<Desired>(b"not json").unwrap_err().to_string();
        assert!(text.starts_with("payload is not valid JSON"), "{text}");
        let missing = decode::<Desired>(br#"{"version":1}"#).unwrap_err().to_string();
        assert!(missing.contains("rolloutId"), "{missing}");
    }

    #[test]
    fn unknown_fields_of_the_same_version_are_ignored() {
        let d: Desired = decode(br#"{"version":1,"rolloutId":"r","manifest":"m","addedLater":true}"#).unwrap();
        assert_eq!(d.rollout_id, "r");
    }

    #[test]
    fn status_content_ignores_seq_and_time() {
        let a = Status {
            version: 1,
            vehicle: "v".into(),
            seq: 1,
            published_at: "t1".into(),
            rollout: None,
            applied_rollout: Some("r1".into()),
            accepted_seq: 0,
            job: None,
            ready: true,
            available: true,
            workloads: BTreeMap::new(),
        };
        let mut b = a.clone();
        b.seq = 2;
        b.published_at = "t2".into();
        assert!(a.content_eq(&b));
        b.ready = false;
        assert!(!a.content_eq(&b));
    }
}
