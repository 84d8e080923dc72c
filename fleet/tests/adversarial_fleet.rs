//! The fleet connector's trust boundary: what a broker (or anyone who can
//! publish to a vehicle's topics) must not be able to do. Each item is one
//! test. The connector runs its real logic against a fake control
//! interface (the vehicle's server: its configs and every update it is
//! sent) and a fake broker, on a paused clock; the operator side is the
//! real `ank-fleet` code without a broker.
//!
//! A broker can drop, delay and reorder messages; it must not be able to:
//! 1. have an unsigned message applied;
//! 2. forge a message with a key that is not the operator's;
//! 3. alter a signed message (its manifest, rollout id or sequence);
//! 4. hand a message signed for another vehicle to this one;
//! 5. replay an older signed message after a newer one;
//! 6. replay it after the connector restarted;
//! 7. replay a message older than one the vehicle refused;
//! 8. crash or wedge the connector with an oversized message;
//! 9. ... with malformed JSON or a newer payload version;
//! 10. smuggle a rollout id that breaks a topic or a path;
//! 11. have a signed message change the connector itself or the ledger;
//! 12. widen the update through names planted in the ledger;
//! 13. feed a message through another topic than the vehicle's desired;
//! 14. talk to a connector or `ank-fleet` over plain MQTT unless asked;
//! 15. plant a vehicle id in the fleet view that breaks a topic;
//! 16. pass one vehicle's status or info off as another's;
//! 17. have `ank-fleet` publish a rollout without signing it by mistake;
//! 18. start a connector that accepts unsigned messages by default;
//! 19. use a topic prefix with wildcards.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ank_common::complete_state::ConfigItem;
use ank_common::convert::{PartialCompleteState, PartialState};
use ank_fleet::cli::view::{Vehicle, take_vehicle};
use ank_fleet::connector::apply::{ApplyContext, LEDGER_CONFIG};
use ank_fleet::connector::control::{ControlApi, ControlError};
use ank_fleet::connector::core::{Connector, MAX_DESIRED_BYTES, Settings};
use ank_fleet::connector::fake_broker::FakeBroker;
use ank_fleet::link::{LinkEvent, Publish};
use ank_fleet::payload::{Desired, RolloutResult, Status, decode, encode};
use ank_fleet::signing::{SigningKey, VerifyingKey, generate};
use ank_fleet::topics::{Topics, VehicleTopic};
use async_trait::async_trait;
use clap::Parser;
use rumqttc::v5::mqttbytes::QoS;
use rustls_pki_types::pem::PemObject;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, sleep};

const APP: &str = "apiVersion: v1\nworkloads:\n  app:\n    runtime: podman\n    runtimeConfig: \"image: x\"\n";
const DESIRED_TOPIC: &str = "fleet/v01/desired";

/// The vehicle's server as the connector sees it.
#[derive(Default)]
struct Server {
    configs: BTreeMap<String, ConfigItem>,
    /// The update mask of every update sent, in order.
    updates: Vec<Vec<String>>,
}

#[derive(Clone, Default)]
struct FakeControl(Arc<Mutex<Server>>);

#[async_trait]
impl ControlApi for FakeControl {
    async fn complete_state(&mut self, _masks: &[&str]) -> Result<PartialCompleteState, ControlError> {
        let mut desired = PartialState::current();
        desired.configs = Some(self.0.lock().unwrap().configs.clone());
        Ok(PartialCompleteState::of_desired(desired))
    }

    async fn update_state(&mut self, new_state: PartialCompleteState, mask: Vec<String>) -> Result<u64, ControlError> {
        let mut server = self.0.lock().unwrap();
        let configs = new_state.desired_state.and_then(|d| d.configs).unwrap_or_default();
        if let Some(ledger) = configs.get(LEDGER_CONFIG) {
            server.configs.insert(LEDGER_CONFIG.to_owned(), ledger.clone());
        }
        server.updates.push(mask);
        Ok(server.updates.len() as u64)
    }

    async fn changed(&mut self) -> Result<(), ControlError> {
        std::future::pending().await
    }

    async fn reconnect(&mut self) -> Result<(), ControlError> {
        Ok(())
    }
}

/// One vehicle (v01) with a connector that trusts `operator`, and the
/// operator's key.
struct Harness {
    control: FakeControl,
    broker: FakeBroker,
    operator: SigningKey,
    trusted: VerifyingKey,
}

fn key() -> SigningKey {
    let (pem, _) = generate().unwrap();
    let der = rustls_pki_types::PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap();
    SigningKey::from_pkcs8(der.secret_der()).unwrap()
}

impl Harness {
    fn new() -> Self {
        let operator = key();
        let trusted = operator.verifying_key();
        Self { control: FakeControl::default(), broker: FakeBroker::default(), operator, trusted }
    }

    fn signed(&self, id: &str, manifest: &str, vehicle: &str, seq: u64) -> Vec<u8> {
        let mut d = Desired::unsigned(id, manifest);
        self.operator.sign(&mut d, vehicle, seq);
        encode(&d)
    }

    fn updates(&self) -> usize {
        self.control.0.lock().unwrap().updates.len()
    }

    fn last_status(&self) -> Status {
        let published = self.broker.published.lock().unwrap();
        let (_, payload) = published.iter().rev().find(|(t, _)| t == "fleet/v01/status").expect("a status");
        decode(payload).unwrap()
    }

    /// Runs a connector (trusting `self.trusted`) that gets `messages` on
    /// `topic`, one after the other, then stops.
    async fn deliver(&self, messages: Vec<(&str, Vec<u8>)>) {
        let settings = Settings {
            vehicle: "v01".into(),
            topics: Topics::default(),
            labels: BTreeMap::new(),
            apply: ApplyContext { default_agent: Some("v01".into()), own_workload: "fleet-connector".into() },
            min_interval: Duration::from_millis(10),
            heartbeat: Duration::from_secs(300),
            operator_key: Some(self.trusted.clone()),
        };
        let connector = Connector::new(settings, self.control.clone(), self.broker.clone());
        let (link, rx) = mpsc::channel(16);
        let (stop, stopped) = oneshot::channel::<()>();
        let done = tokio::spawn(connector.run(rx, async {
            let _ = stopped.await;
        }));
        link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
        for (topic, payload) in messages {
            let publish = Publish::new(topic, QoS::AtLeastOnce, payload.clone(), None);
            link.send(LinkEvent::Message { topic: topic.into(), payload, publish: Box::new(publish) }).await.unwrap();
            sleep(Duration::from_millis(500)).await;
        }
        sleep(Duration::from_secs(2)).await;
        let _ = stop.send(());
        done.await.unwrap();
    }

    fn rejection(&self) -> (String, String) {
        let rollout = self.last_status().rollout.expect("the status names the refused message");
        assert_eq!(rollout.result, RolloutResult::Rejected);
        (rollout.id, rollout.reason)
    }
}

#[tokio::test(start_paused = true)]
async fn an_unsigned_message_is_not_applied() {
    let h = Harness::new();
    h.deliver(vec![(DESIRED_TOPIC, encode(&Desired::unsigned("r1", APP)))]).await;
    assert_eq!(h.updates(), 0);
    let (id, reason) = h.rejection();
    assert_eq!(id, "r1");
    assert!(reason.starts_with("unsigned desired message refused") && reason.contains("--allow-unsigned"), "{reason}");
}

#[tokio::test(start_paused = true)]
async fn a_message_signed_with_another_key_is_not_applied() {
    let h = Harness::new();
    let mut forged = Desired::unsigned("r1", APP);
    key().sign(&mut forged, "v01", 1);
    h.deliver(vec![(DESIRED_TOPIC, encode(&forged))]).await;
    assert_eq!(h.updates(), 0);
    assert!(h.rejection().1.contains("does not verify with the operator key"));
}

#[tokio::test(start_paused = true)]
async fn an_altered_signed_message_is_not_applied() {
    let h = Harness::new();
    let good: Desired = decode(&h.signed("r1", APP, "v01", 5)).unwrap();
    let mut manifest = good.clone();
    manifest.manifest = APP.replace("image: x", "image: evil\\n    commandOptions: [--privileged]");
    let mut id = good.clone();
    id.rollout_id = "r2".into();
    let mut seq = good.clone();
    seq.seq = 6;
    h.deliver(vec![(DESIRED_TOPIC, encode(&manifest)), (DESIRED_TOPIC, encode(&id)), (DESIRED_TOPIC, encode(&seq))])
        .await;
    assert_eq!(h.updates(), 0, "no altered field gets through");
    assert!(h.rejection().1.contains("forged or altered"));
}

#[tokio::test(start_paused = true)]
async fn a_message_signed_for_another_vehicle_is_not_applied() {
    let h = Harness::new();
    h.deliver(vec![(DESIRED_TOPIC, h.signed("r1", APP, "v02", 1))]).await;
    assert_eq!(h.updates(), 0);
    assert_eq!(h.rejection().1, "desired message signed for vehicle 'v02' refused: this is vehicle 'v01'");
}

#[tokio::test(start_paused = true)]
async fn an_older_signed_message_is_not_replayed_after_a_newer_one() {
    let h = Harness::new();
    let old = h.signed("r1", APP, "v01", 10);
    let new = h.signed("r2", &APP.replace("image: x", "image: y"), "v01", 11);
    h.deliver(vec![(DESIRED_TOPIC, old.clone()), (DESIRED_TOPIC, new.clone()), (DESIRED_TOPIC, old)]).await;
    assert_eq!(h.updates(), 2, "r1 and r2, not r1 again");
    let status = h.last_status();
    assert_eq!(status.applied_rollout.as_deref(), Some("r2"));
    assert_eq!(status.accepted_seq, 11);
    // The same message again (a redelivery of the retained one) is harmless.
    h.deliver(vec![(DESIRED_TOPIC, new)]).await;
    assert_eq!(h.updates(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_connector_restart_does_not_reopen_replay() {
    let h = Harness::new();
    let old = h.signed("r1", APP, "v01", 10);
    h.deliver(vec![(DESIRED_TOPIC, old.clone()), (DESIRED_TOPIC, h.signed("r2", APP, "v01", 11))]).await;
    assert_eq!(h.updates(), 2);
    // A new connector process: its only memory is the vehicle's ledger.
    h.deliver(vec![(DESIRED_TOPIC, old)]).await;
    assert_eq!(h.updates(), 2, "the ledger's sequence number survives the restart");
    assert_eq!(h.last_status().applied_rollout.as_deref(), Some("r2"));
}

#[tokio::test(start_paused = true)]
async fn a_message_older_than_a_refused_one_is_not_applied() {
    let h = Harness::new();
    let bad = APP.replace("podman", "podman\n    restartPolicy: SOMETIMES");
    h.deliver(vec![(DESIRED_TOPIC, h.signed("r2", &bad, "v01", 20)), (DESIRED_TOPIC, h.signed("r1", APP, "v01", 19))])
        .await;
    assert_eq!(h.updates(), 0, "r1 was superseded by r2 (refused, but verified)");
}

#[tokio::test(start_paused = true)]
async fn an_oversized_message_is_refused_unread_and_the_connector_goes_on() {
    let h = Harness::new();
    let huge = vec![b' '; MAX_DESIRED_BYTES + 1];
    h.deliver(vec![(DESIRED_TOPIC, huge), (DESIRED_TOPIC, h.signed("r1", APP, "v01", 1))]).await;
    assert_eq!(h.updates(), 1, "the next good message is applied");
    assert_eq!(*h.broker.acks.lock().unwrap(), 2, "both handled and acknowledged (no redelivery loop)");
}

#[tokio::test(start_paused = true)]
async fn malformed_and_too_new_payloads_are_refused_and_the_connector_goes_on() {
    let h = Harness::new();
    h.deliver(vec![(DESIRED_TOPIC, b"{not json".to_vec())]).await;
    let (id, reason) = h.rejection();
    assert!(id.is_empty() && reason.starts_with("payload is not valid JSON"), "{reason}");
    let mut newer: serde_json::Value = serde_json::from_slice(&h.signed("r1", APP, "v01", 1)).unwrap();
    newer["version"] = 2.into();
    h.deliver(vec![(DESIRED_TOPIC, newer.to_string().into_bytes()), (DESIRED_TOPIC, h.signed("r1", APP, "v01", 2))])
        .await;
    assert_eq!(h.updates(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_rollout_id_that_breaks_a_topic_or_path_is_refused() {
    for bad in ["../etc", "a/b", "r+", "r#", "..", "r\u{1}x", ""] {
        let h = Harness::new();
        h.deliver(vec![(DESIRED_TOPIC, h.signed(bad, APP, "v01", 1))]).await;
        assert_eq!(h.updates(), 0, "{bad:?}");
        let (id, reason) = h.rejection();
        assert!(id.is_empty(), "an invalid id is not repeated in the status: {id:?}");
        assert!(reason.starts_with("invalid rollout id"), "{reason}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_signed_message_cannot_touch_the_connector_or_the_ledger() {
    let h = Harness::new();
    let own = "apiVersion: v1\nworkloads:\n  fleet-connector:\n    runtime: podman\n    runtimeConfig: \"\"\n";
    let ledger = "apiVersion: v1\nconfigs:\n  fleet-rollout: forged\n";
    h.deliver(vec![(DESIRED_TOPIC, h.signed("r1", own, "v01", 1))]).await;
    assert!(h.rejection().1.contains("is the fleet connector itself"));
    h.deliver(vec![(DESIRED_TOPIC, h.signed("r2", ledger, "v01", 2))]).await;
    assert!(h.rejection().1.contains("is the fleet's own record"));
    assert_eq!(h.updates(), 0);
}

#[tokio::test(start_paused = true)]
async fn names_planted_in_the_ledger_do_not_become_update_masks() {
    for (field, name) in [("workloads", "app.runtimeConfig"), ("workloads", "*"), ("configs", ""), ("groups", "a.b")] {
        let h = Harness::new();
        let planted = ConfigItem::Object(BTreeMap::from([
            ("current".to_owned(), ConfigItem::String("r0".into())),
            (field.to_owned(), ConfigItem::Array(vec![ConfigItem::String(name.into())])),
        ]));
        h.control.0.lock().unwrap().configs.insert(LEDGER_CONFIG.into(), planted);
        h.deliver(vec![(DESIRED_TOPIC, h.signed("r1", APP, "v01", 1))]).await;
        assert_eq!(h.updates(), 0, "{field}: {name:?}");
        assert!(h.rejection().1.starts_with("the ledger (config 'fleet-rollout') is refused"), "{name:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_message_on_another_topic_is_not_applied() {
    let h = Harness::new();
    let for_v01 = h.signed("r1", APP, "v01", 1);
    h.deliver(vec![("fleet/v02/desired", for_v01.clone()), ("fleet/v01/status", for_v01)]).await;
    assert_eq!(h.updates(), 0);
    assert_eq!(*h.broker.acks.lock().unwrap(), 2, "ignored and acknowledged");
}

#[test]
fn plain_mqtt_is_refused_by_the_connector_and_by_ank_fleet_unless_asked() {
    let url = ank_fleet::mqtt::BrokerUrl::parse("mqtt://broker:1883").unwrap();
    let files = ank_fleet::mqtt::TlsFiles::default();
    let text = ank_fleet::mqtt::options("v01", &url, &files, false).unwrap_err().to_string();
    assert!(text.contains("refusing plain 'mqtt://broker:1883'") && text.contains("--allow-plaintext"), "{text}");
    let connector = ank_fleet::connector::config::ConnectorArgs::try_parse_from([
        "ank-fleet-connector",
        "--vehicle=v01",
        "--broker=mqtt://broker",
        "--allow-unsigned",
    ])
    .unwrap();
    assert!(!connector.allow_plaintext, "plaintext is off unless asked for");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let fleet = ank_fleet::cli::FleetArgs::try_parse_from(["ank-fleet", "--broker=mqtt://127.0.0.1:1", "status"]);
    let error = rt.block_on(ank_fleet::cli::run(fleet.unwrap())).unwrap_err().to_string();
    assert!(error.contains("refusing plain") && error.contains("--allow-plaintext"), "{error}");
}

#[test]
fn a_vehicle_id_that_breaks_a_topic_is_kept_out_of_the_fleet_view() {
    let mut vehicles: BTreeMap<String, Vehicle> = BTreeMap::new();
    let online = br#"{"version":1,"online":true}"#;
    for bad in ["..", "rollouts", "a b", "x\u{7}", "v..1"] {
        let why = take_vehicle(&mut vehicles, bad, VehicleTopic::Online, online).expect("refused");
        assert!(why.starts_with("invalid vehicle id"), "{why}");
    }
    assert!(vehicles.is_empty(), "a rollout never publishes to such a vehicle");
    assert_eq!(take_vehicle(&mut vehicles, "v01", VehicleTopic::Online, online), None);
}

#[test]
fn a_status_or_info_naming_another_vehicle_is_not_taken() {
    let mut vehicles: BTreeMap<String, Vehicle> = BTreeMap::new();
    let status = br#"{"version":1,"vehicle":"v02","seq":1,"publishedAt":"t","ready":true,"available":true}"#;
    let info = br#"{"version":1,"vehicle":"v02","labels":{"model":"x"}}"#;
    let why = take_vehicle(&mut vehicles, "v01", VehicleTopic::Status, status).unwrap();
    assert_eq!(why, "it names vehicle 'v02'");
    assert!(take_vehicle(&mut vehicles, "v01", VehicleTopic::Info, info).is_some());
    let v01 = vehicles.get("v01").cloned().unwrap_or_default();
    assert!(v01.status.is_none() && v01.info.is_none());
    let garbage = take_vehicle(&mut vehicles, "v01", VehicleTopic::Status, b"\xff\xfe").unwrap();
    assert!(garbage.starts_with("payload is not valid JSON"), "{garbage}");
}

#[test]
fn ank_fleet_refuses_to_publish_a_rollout_it_cannot_sign() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("app.yaml");
    std::fs::write(&manifest, APP).unwrap();
    let args = ank_fleet::cli::FleetArgs::try_parse_from([
        "ank-fleet".as_ref(),
        "rollout".as_ref(),
        "-f".as_ref(),
        manifest.as_os_str(),
    ])
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Refused before any connection: no broker is needed to see it.
    let error = rt.block_on(ank_fleet::cli::run(args)).unwrap_err().to_string();
    assert!(error.contains("--signing-key") && error.contains("ank-fleet keygen"), "{error}");
}

#[test]
fn a_connector_does_not_accept_unsigned_messages_by_default() {
    let args = ["ank-fleet-connector", "--vehicle=v01", "--broker=mqtts://broker"];
    let error = ank_fleet::connector::config::ConnectorArgs::try_parse_from(args).unwrap_err().to_string();
    assert!(error.contains("--operator-key"), "{error}");
}

#[test]
fn a_topic_prefix_with_wildcards_is_refused() {
    for bad in ["fleet/#", "+", "$SYS", "a//b"] {
        let error = Topics::parse(bad).unwrap_err().to_string();
        assert!(error.starts_with("invalid topic prefix"), "{error}");
    }
}
