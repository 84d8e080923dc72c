//! The connector's logic against a fake control interface and a fake
//! broker, on a paused clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ank_common::complete_state::ConfigItem;
use ank_common::convert::{PartialCompleteState, PartialState};
use async_trait::async_trait;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::Publish;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, sleep};

use super::apply::{ApplyContext, LEDGER_CONFIG};
use super::control::{ControlApi, ControlError};
use super::core::{Connector, Settings};
use super::fake_broker::FakeBroker;
use crate::link::LinkEvent;
use crate::payload::{Desired, RolloutResult, Status, decode, encode};
use crate::topics::Topics;

/// The vehicle's server as the connector sees it: configs and updates.
#[derive(Default)]
struct Vehicle {
    configs: BTreeMap<String, ConfigItem>,
    updates: Vec<Vec<String>>,
    up: bool,
    /// Reads are answered `Access denied`.
    denied: bool,
}

#[derive(Clone, Default)]
struct FakeControl(Arc<Mutex<Vehicle>>);

#[async_trait]
impl ControlApi for FakeControl {
    async fn complete_state(&mut self, _masks: &[&str]) -> Result<PartialCompleteState, ControlError> {
        let v = self.0.lock().unwrap();
        if !v.up {
            return Err(ControlError::Disconnected("down".into()));
        }
        if v.denied {
            return Err(ControlError::Refused("Access denied".into()));
        }
        let mut desired = PartialState::current();
        desired.configs = Some(v.configs.clone());
        Ok(PartialCompleteState::of_desired(desired))
    }

    async fn update_state(&mut self, new_state: PartialCompleteState, mask: Vec<String>) -> Result<u64, ControlError> {
        let mut v = self.0.lock().unwrap();
        if !v.up {
            return Err(ControlError::Disconnected("down".into()));
        }
        let configs = new_state.desired_state.and_then(|d| d.configs).unwrap_or_default();
        if let Some(ledger) = configs.get(LEDGER_CONFIG) {
            v.configs.insert(LEDGER_CONFIG.to_owned(), ledger.clone());
        }
        v.updates.push(mask);
        Ok(v.updates.len() as u64)
    }

    async fn changed(&mut self) -> Result<(), ControlError> {
        std::future::pending().await
    }

    async fn reconnect(&mut self) -> Result<(), ControlError> {
        if self.0.lock().unwrap().up { Ok(()) } else { Err(ControlError::Disconnected("down".into())) }
    }
}

impl FakeBroker {
    fn statuses(&self) -> Vec<Status> {
        let published = self.published.lock().unwrap();
        published.iter().filter(|(t, _)| t == "fleet/v01/status").map(|(_, p)| decode(p).unwrap()).collect()
    }
}

const APP: &str = "apiVersion: v1\nworkloads:\n  app:\n    runtime: podman\n    runtimeConfig: \"image: x\"\n";

fn desired(id: &str, manifest: &str) -> LinkEvent {
    let payload = encode(&Desired::unsigned(id, manifest));
    let publish = Publish::new("fleet/v01/desired", QoS::AtLeastOnce, payload.clone(), None);
    LinkEvent::Message { topic: "fleet/v01/desired".into(), payload, publish: Box::new(publish) }
}

/// A running connector: its link and its stop switch.
struct Running {
    link: mpsc::Sender<LinkEvent>,
    stop: oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

fn start(control: &FakeControl, broker: &FakeBroker) -> Running {
    let settings = Settings {
        vehicle: "v01".into(),
        topics: Topics::default(),
        labels: BTreeMap::new(),
        apply: ApplyContext { default_agent: Some("v01".into()), own_workload: "fleet-connector".into() },
        min_interval: Duration::from_secs(1),
        heartbeat: Duration::from_secs(300),
        operator_key: None,
    };
    let connector = Connector::new(settings, control.clone(), broker.clone());
    let (link, rx) = mpsc::channel(16);
    let (stop, stopped) = oneshot::channel();
    let done = tokio::spawn(connector.run(rx, async {
        let _ = stopped.await;
    }));
    Running { link, stop, done }
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.done.await.unwrap();
    }
}

fn up() -> FakeControl {
    let control = FakeControl::default();
    control.0.lock().unwrap().up = true;
    control
}

#[tokio::test(start_paused = true)]
async fn a_rollout_is_applied_once_also_when_redelivered_and_after_a_connector_restart() {
    let (control, broker) = (up(), FakeBroker::default());
    let run = start(&control, &broker);
    run.link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(2)).await;
    run.stop().await;
    let run = start(&control, &broker);
    run.link.send(LinkEvent::Connected { session_present: true }).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(2)).await;
    run.stop().await;

    assert_eq!(control.0.lock().unwrap().updates.len(), 1, "one apply for three deliveries");
    assert_eq!(*broker.acks.lock().unwrap(), 3, "every delivery acknowledged once handled");
    let last = broker.statuses().pop().expect("a status was published");
    assert_eq!(last.applied_rollout.as_deref(), Some("r1"));
    assert_eq!(last.rollout.unwrap().result, RolloutResult::Applied);
}

#[tokio::test(start_paused = true)]
async fn an_invalid_manifest_is_rejected_and_reported_and_an_old_replay_is_ignored() {
    let (control, broker) = (up(), FakeBroker::default());
    let run = start(&control, &broker);
    run.link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    run.link.send(desired("r2", APP.replace("podman", "podman\n    restartPolicy: SOMETIMES").as_str())).await.unwrap();
    sleep(Duration::from_secs(2)).await;
    let rejected = broker.statuses().pop().unwrap();
    let rollout = rejected.rollout.unwrap();
    assert_eq!((rollout.id.as_str(), rollout.result), ("r2", RolloutResult::Rejected));
    assert!(rollout.reason.contains("rollout 'r2'"), "{}", rollout.reason);
    assert_eq!(rejected.applied_rollout.as_deref(), Some("r1"), "nothing changed");
    run.link.send(desired("r3", APP)).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(2)).await;
    run.stop().await;
    assert_eq!(control.0.lock().unwrap().updates.len(), 2, "r1 and r3; not r2, not the replay of r1");
    assert_eq!(broker.statuses().pop().unwrap().applied_rollout.as_deref(), Some("r3"));
}

#[tokio::test(start_paused = true)]
async fn a_message_waits_while_the_control_interface_is_down_and_is_acknowledged_only_when_applied() {
    let (control, broker) = (FakeControl::default(), FakeBroker::default());
    let run = start(&control, &broker);
    run.link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(5)).await;
    assert_eq!(*broker.acks.lock().unwrap(), 0, "not handled yet: not acknowledged");
    control.0.lock().unwrap().up = true;
    sleep(Duration::from_secs(3)).await;
    run.stop().await;
    assert_eq!(control.0.lock().unwrap().updates.len(), 1);
    assert_eq!(*broker.acks.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn offline_the_status_is_kept_and_the_latest_goes_out_on_reconnect() {
    let (control, broker) = (up(), FakeBroker::default());
    let run = start(&control, &broker);
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(3)).await;
    assert!(broker.statuses().is_empty(), "nothing is published while offline");
    run.link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
    sleep(Duration::from_millis(500)).await;
    let statuses = broker.statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].applied_rollout.as_deref(), Some("r1"));
    run.link.send(LinkEvent::Disconnected("cut".into())).await.unwrap();
    run.link.send(LinkEvent::Connected { session_present: true }).await.unwrap();
    sleep(Duration::from_millis(500)).await;
    let again = broker.statuses();
    assert_eq!(again.len(), 2, "sent again after the reconnect");
    assert!(again[1].seq > again[0].seq);
    let topics: Vec<String> = broker.published.lock().unwrap().iter().map(|(t, _)| t.clone()).collect();
    assert!(
        topics.iter().any(|t| t == "fleet/v01/info") && topics.iter().any(|t| t == "fleet/v01/online"),
        "{topics:?}"
    );
    run.stop().await;
    let (topic, last) = broker.published.lock().unwrap().last().cloned().unwrap();
    assert_eq!(topic, "fleet/v01/online");
    assert_eq!(String::from_utf8(last).unwrap(), r#"{"version":1,"online":false}"#, "a clean stop says offline");
}

#[tokio::test(start_paused = true)]
async fn a_connector_without_read_access_rejects_the_rollout_instead_of_retrying_forever() {
    let (control, broker) = (up(), FakeBroker::default());
    control.0.lock().unwrap().denied = true;
    let run = start(&control, &broker);
    run.link.send(LinkEvent::Connected { session_present: false }).await.unwrap();
    run.link.send(desired("r1", APP)).await.unwrap();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(*broker.acks.lock().unwrap(), 1, "handled: acknowledged");
    assert!(control.0.lock().unwrap().updates.is_empty());
    control.0.lock().unwrap().denied = false;
    sleep(Duration::from_secs(31)).await;
    run.stop().await;
    let status = broker.statuses().pop().expect("the status once reading is allowed again");
    let rollout = status.rollout.unwrap();
    assert_eq!(rollout.result, RolloutResult::Rejected);
    assert!(
        rollout.reason.contains("cannot read the ledger") && rollout.reason.contains("Access denied"),
        "{}",
        rollout.reason
    );
}
