//! The fleet as the broker's retained messages show it: each vehicle's
//! info (labels), status and online flag. [`Fleet`] keeps one connection
//! open and updates the view as messages arrive, which is how a rollout
//! watches its waves.

use std::collections::BTreeMap;
use std::time::Duration;

use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::QoS;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Signer;
use crate::link::{LinkEvent, spawn_pump};
use crate::mqtt::{BrokerUrl, TlsFiles, options};
use crate::payload::{
    self, Desired, Info, Online, RolloutControl, RolloutRecord, RolloutResult, Status, WorkloadStatus, encode,
};
use crate::selector::Selector;
use crate::topics::{Topics, VehicleTopic, check_vehicle};

/// What the fleet knows of one vehicle.
#[derive(Debug, Clone, Default)]
pub struct Vehicle {
    pub info: Option<Info>,
    pub status: Option<Status>,
    pub online: Option<bool>,
}

impl Vehicle {
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.info.as_ref().map(|i| i.labels.clone()).unwrap_or_default()
    }
}

/// One row of `ank-fleet status -o json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VehicleRow {
    pub vehicle: String,
    pub labels: BTreeMap<String, String>,
    pub online: Option<bool>,
    /// The rollout the vehicle's desired state holds (its ledger).
    pub rollout_id: Option<String>,
    /// The newest desired message the vehicle handled, when it refused it:
    /// its rollout id (empty when the message had no valid one) and why.
    /// Absent once a later message is applied.
    pub rejected_rollout: Option<String>,
    pub rejected_reason: Option<String>,
    pub job_phase: Option<String>,
    pub ready: bool,
    pub available: bool,
    pub last_seen: Option<String>,
    pub workloads: BTreeMap<String, WorkloadStatus>,
}

impl VehicleRow {
    pub fn of(name: &str, v: &Vehicle) -> Self {
        let status = v.status.as_ref();
        let rejected = status.and_then(|s| s.rollout.as_ref()).filter(|r| r.result == RolloutResult::Rejected);
        Self {
            vehicle: name.to_owned(),
            labels: v.labels(),
            online: v.online,
            rollout_id: status.and_then(|s| s.applied_rollout.clone()),
            rejected_rollout: rejected.map(|r| r.id.clone()),
            rejected_reason: rejected.map(|r| r.reason.clone()),
            job_phase: status.and_then(|s| s.job.as_ref()).map(|j| j.phase.clone()),
            ready: status.is_some_and(|s| s.ready),
            available: status.is_some_and(|s| s.available),
            last_seen: status.map(|s| s.published_at.clone()),
            workloads: status.map(|s| s.workloads.clone()).unwrap_or_default(),
        }
    }
}

/// Takes one message of a vehicle's into `vehicles`; says why when it is not taken.
/// A vehicle id that could not be a topic level again (when the
/// rollout publishes to it) is ignored, and so is a status or info
/// that names another vehicle than its topic.
pub fn take_vehicle(
    vehicles: &mut BTreeMap<String, Vehicle>,
    vehicle: &str,
    kind: VehicleTopic,
    payload: &[u8],
) -> Option<String> {
    if let Err(e) = check_vehicle(vehicle) {
        return Some(e.to_string());
    }
    let other = |named: &str| (named != vehicle).then(|| format!("it names vehicle '{}'", named.escape_debug()));
    let entry = vehicles.entry(vehicle.to_owned()).or_default();
    let result = match kind {
        VehicleTopic::Info => payload::decode::<Info>(payload).map(|i| match other(&i.vehicle) {
            None => {
                entry.info = Some(i);
                None
            }
            some => some,
        }),
        VehicleTopic::Status => payload::decode::<Status>(payload).map(|s| match other(&s.vehicle) {
            None => {
                entry.status = Some(s);
                None
            }
            some => some,
        }),
        VehicleTopic::Online => payload::decode::<Online>(payload).map(|o| {
            entry.online = Some(o.online);
            None
        }),
        VehicleTopic::Desired | VehicleTopic::Events => Ok(None),
    };
    result.unwrap_or_else(|e| Some(e.to_string()))
}

/// A connection to the broker and the view it keeps.
pub struct Fleet {
    pub topics: Topics,
    client: AsyncClient,
    link: mpsc::Receiver<LinkEvent>,
    pub vehicles: BTreeMap<String, Vehicle>,
    /// Retained rollout records and controls seen, by topic.
    pub retained: BTreeMap<String, Vec<u8>>,
    /// What this connection subscribed to, to subscribe again after a
    /// reconnect (the session is not kept).
    filters: Vec<String>,
    /// How desired messages are signed.
    pub signer: Signer,
    /// The last sequence number signed by this process.
    last_seq: u64,
}

/// How long the broker may take to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Retained messages are complete when none came for this long.
const QUIET: Duration = Duration::from_millis(500);

impl Fleet {
    /// Connects as an operator and loads the retained view.
    pub async fn connect(
        broker: &str,
        files: &TlsFiles,
        topics: Topics,
        allow_plaintext: bool,
    ) -> anyhow::Result<Self> {
        let url = BrokerUrl::parse(broker)?;
        let client_id = format!("ank-fleet-{}-{:04x}", std::process::id(), fastrand::u16(..));
        let mut opts = options(&client_id, &url, files, allow_plaintext)?;
        opts.set_clean_start(true);
        let (client, eventloop) = AsyncClient::new(opts, 256);
        let mut link = spawn_pump(eventloop);
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        let mut last_error = String::from("no answer");
        loop {
            match tokio::time::timeout_at(deadline, link.recv()).await {
                Ok(Some(LinkEvent::Connected { .. })) => break,
                Ok(Some(LinkEvent::Disconnected(e))) => last_error = e,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => anyhow::bail!("cannot connect to the broker {broker}: {last_error}"),
            }
        }
        let filters = [VehicleTopic::Info, VehicleTopic::Status, VehicleTopic::Online]
            .map(|kind| topics.every_vehicle(kind))
            .to_vec();
        let mut fleet = Self {
            topics,
            client,
            link,
            vehicles: BTreeMap::new(),
            retained: BTreeMap::new(),
            filters: Vec::new(),
            signer: Signer::Missing,
            last_seq: 0,
        };
        for filter in filters {
            fleet.subscribe(filter).await?;
        }
        fleet.settle().await?;
        Ok(fleet)
    }

    /// Takes messages until none came for a while.
    pub async fn settle(&mut self) -> anyhow::Result<()> {
        while self.next_within(QUIET).await? {}
        Ok(())
    }

    async fn subscribe(&mut self, filter: String) -> anyhow::Result<()> {
        self.client.subscribe(filter.clone(), QoS::AtLeastOnce).await?;
        self.filters.push(filter);
        Ok(())
    }

    /// Subscribes to more topics (rollout records) and takes their retained messages.
    pub async fn watch(&mut self, filter: &str) -> anyhow::Result<()> {
        self.subscribe(filter.to_owned()).await?;
        self.settle().await
    }

    /// Waits up to `wait` for a message, then takes every message already
    /// there too, so a burst of statuses costs one look at the fleet.
    pub async fn drain(&mut self, wait: Duration) -> anyhow::Result<()> {
        if self.next_within(wait).await? {
            for _ in 0..10_000 {
                if !self.next_within(Duration::ZERO).await? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Takes one message if one comes within `wait`; false if none came.
    pub async fn next_within(&mut self, wait: Duration) -> anyhow::Result<bool> {
        match tokio::time::timeout(wait, self.link.recv()).await {
            Err(_) => Ok(false),
            Ok(None) => anyhow::bail!("the broker link ended"),
            Ok(Some(LinkEvent::Connected { .. })) => {
                tracing::info!("broker link back; subscribing again");
                for filter in &self.filters {
                    self.client.subscribe(filter.clone(), QoS::AtLeastOnce).await?;
                }
                Ok(true)
            }
            Ok(Some(event)) => {
                self.take(event);
                Ok(true)
            }
        }
    }

    fn take(&mut self, event: LinkEvent) {
        let LinkEvent::Message { topic, payload, .. } = event else {
            if let LinkEvent::Disconnected(e) = event {
                tracing::warn!("broker link: {e}; reconnecting");
            }
            return;
        };
        let Some((vehicle, kind)) = self.topics.parse_vehicle(&topic) else {
            self.retained.insert(topic, payload);
            return;
        };
        if let Some(problem) = take_vehicle(&mut self.vehicles, &vehicle, kind, &payload) {
            tracing::warn!("'{}' ignored: {problem}", topic.escape_debug());
        }
    }

    /// The `desired` payload of rollout `id` for `vehicle`, signed when
    /// there is a key. Its sequence number is above both the last one the
    /// vehicle reported accepting and the last this process signed, and
    /// at least the time in milliseconds, so operators in other processes
    /// (which do not share a counter) also sign ever larger numbers.
    pub fn desired_payload(&mut self, vehicle: &str, id: &str, manifest: &str) -> anyhow::Result<Vec<u8>> {
        let mut desired = Desired::unsigned(id, manifest);
        match &self.signer {
            Signer::Unsigned => {}
            Signer::Missing => anyhow::bail!("no --signing-key to sign the rollout with (or --unsigned)"),
            Signer::Key(key) => {
                let accepted = self.vehicles.get(vehicle).and_then(|v| v.status.as_ref()).map_or(0, |s| s.accepted_seq);
                let now_ms = ank_common::daemon::clock::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                let seq = now_ms.max(accepted.saturating_add(1)).max(self.last_seq.saturating_add(1));
                self.last_seq = seq;
                key.sign(&mut desired, vehicle, seq);
            }
        }
        Ok(encode(&desired))
    }

    /// The vehicles whose labels match, by name.
    pub fn select(&self, selector: &Selector) -> Vec<String> {
        self.vehicles
            .iter()
            .filter(|(_, v)| v.info.is_some() && selector.matches(&v.labels()))
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub async fn publish(&self, topic: &str, payload: Vec<u8>, retain: bool) -> anyhow::Result<()> {
        self.client.publish(topic, QoS::AtLeastOnce, retain, payload).await?;
        Ok(())
    }

    /// The retained record of a rollout, if the broker has one.
    pub fn record(&self, id: &str) -> Option<RolloutRecord> {
        self.retained.get(&self.topics.rollout(id)).and_then(|p| payload::decode(p).ok())
    }

    /// The retained control of a rollout, if any.
    pub fn control(&self, id: &str) -> Option<RolloutControl> {
        self.retained.get(&self.topics.rollout_control(id)).and_then(|p| payload::decode(p).ok())
    }

    /// Waits until what was published has left (QoS 1 acknowledged) and disconnects.
    pub async fn close(mut self) {
        let _ = self.client.disconnect().await;
        let gone = async {
            while let Some(event) = self.link.recv().await {
                if matches!(event, LinkEvent::Disconnected(_)) {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), gone).await;
    }
}
