//! The connector's logic, between the broker link and the control
//! interface (both behind traits, so tests drive it with fakes):
//! - a desired message is applied at most once per rollout id (the ledger,
//!   [`super::apply`]), refused as a whole when it does not validate, and
//!   acknowledged to the broker only once handled, so a connector killed
//!   half-way gets it again;
//! - when the control interface is down the message waits and is retried;
//! - the status is computed after every change of the state, paced by the
//!   [`Pacer`], kept while the broker link is down and sent again on
//!   reconnect; events go out with their counts while connected.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use async_trait::async_trait;
use rumqttc::v5::mqttbytes::v5::Publish;
use tokio::sync::mpsc;
use tokio::time::{Duration, Instant, sleep_until};

use super::apply::{ApplyContext, LEDGER_CONFIG, Ledger, plan};
use super::control::{ControlApi, ControlError};
use super::pacer::Pacer;
use super::status::{EventTracker, STATUS_MASKS, compute, ledger_of};
use crate::link::LinkEvent;
use crate::payload::{Desired, Events, Info, Online, PAYLOAD_VERSION, RolloutResult, RolloutStatus, decode, encode};
use crate::signing::VerifyingKey;
use crate::topics::{Topics, VehicleTopic, check_id};

/// What the connector does on the broker.
#[async_trait]
pub trait Broker: Send + Sync {
    async fn publish(&self, topic: &str, payload: Vec<u8>, retain: bool) -> Result<(), String>;
    async fn subscribe(&self, filter: &str) -> Result<(), String>;
    /// Acknowledges a received message (the broker may drop it then).
    async fn ack(&self, publish: &Publish);
}

/// The connector's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub vehicle: String,
    pub topics: Topics,
    pub labels: BTreeMap<String, String>,
    pub apply: ApplyContext,
    pub min_interval: Duration,
    pub heartbeat: Duration,
    /// The operator's public key; `None` accepts unsigned messages
    /// (`--allow-unsigned`).
    pub operator_key: Option<VerifyingKey>,
}

/// The largest desired message handled; a bigger one is rejected unread.
pub const MAX_DESIRED_BYTES: usize = 1024 * 1024;

/// How soon after a state change the status is computed (more changes in
/// the meantime are taken in the same look).
const SETTLE: Duration = Duration::from_millis(100);
/// How often a control interface that is down is tried again.
const CONTROL_RETRY: Duration = Duration::from_secs(1);
/// How often the state is looked at while the apply job is not finished.
const JOB_POLL: Duration = Duration::from_secs(2);
/// How long after a refused look at the state the next one is tried.
const REFUSED_RETRY: Duration = Duration::from_secs(30);

/// A desired message not handled yet.
struct Pending {
    payload: Vec<u8>,
    publish: Option<Box<Publish>>,
}

/// One connector.
pub struct Connector<C, B> {
    settings: Settings,
    control: C,
    broker: B,
    pacer: Pacer,
    events: EventTracker,
    last_rollout: Option<RolloutStatus>,
    job_id: Option<u64>,
    job_open: bool,
    seq: u64,
    /// The highest sequence number of a verified message in this run; with
    /// the ledger's, the floor below which a message is a replay.
    seq_floor: u64,
    online: bool,
    control_up: bool,
    control_retry_at: Option<Instant>,
    refresh_at: Option<Instant>,
    pending: VecDeque<Pending>,
    /// How many desired messages were applied (changed the state) in this run.
    pub applied: u64,
}

impl<C: ControlApi, B: Broker> Connector<C, B> {
    pub fn new(settings: Settings, control: C, broker: B) -> Self {
        let pacer = Pacer::new(settings.min_interval, settings.heartbeat);
        Self {
            settings,
            control,
            broker,
            pacer,
            events: EventTracker::default(),
            last_rollout: None,
            job_id: None,
            job_open: false,
            seq: 0,
            seq_floor: 0,
            online: false,
            control_up: false,
            control_retry_at: Some(Instant::now()),
            refresh_at: None,
            pending: VecDeque::new(),
            applied: 0,
        }
    }

    /// Runs until `link` ends or `shutdown` completes; then says offline.
    pub async fn run(mut self, mut link: mpsc::Receiver<LinkEvent>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let wake = self.next_wake();
            tokio::select! {
                event = link.recv() => match event {
                    Some(event) => self.on_link(event).await,
                    None => break,
                },
                changed = self.control.changed(), if self.control_up => match changed {
                    Ok(()) => self.schedule_refresh(),
                    Err(e) => self.control_lost(&e),
                },
                () = sleep_until(wake) => {}
                () = &mut shutdown => break,
            }
            self.tick().await;
        }
        if self.online {
            let offline = encode(&Online { version: PAYLOAD_VERSION, online: false });
            let topic = self.settings.topics.vehicle(&self.settings.vehicle, VehicleTopic::Online);
            if let Err(e) = self.broker.publish(&topic, offline, true).await {
                tracing::warn!("cannot say offline: {e}");
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        [
            self.pacer.due().filter(|_| self.online),
            self.refresh_at.filter(|_| self.control_up),
            self.control_retry_at.filter(|_| !self.control_up),
        ]
        .into_iter()
        .flatten()
        .fold(far, Instant::min)
    }

    fn schedule_refresh(&mut self) {
        let at = Instant::now() + SETTLE;
        self.refresh_at = Some(self.refresh_at.map_or(at, |r| r.min(at)));
    }

    fn control_lost(&mut self, e: &ControlError) {
        tracing::warn!("control interface: {e}; reconnecting");
        self.control_up = false;
        self.control_retry_at = Some(Instant::now() + CONTROL_RETRY);
    }

    /// Handles what is due: reconnecting, pending desired messages, the
    /// status look and its publication.
    pub async fn tick(&mut self) {
        let now = Instant::now();
        if !self.control_up && self.control_retry_at.is_some_and(|at| at <= now) {
            match self.control.reconnect().await {
                Ok(()) => {
                    tracing::info!("control interface connected");
                    self.control_up = true;
                    self.control_retry_at = None;
                    self.schedule_refresh();
                }
                Err(e) => {
                    tracing::debug!("control interface not ready: {e}");
                    self.control_retry_at = Some(Instant::now() + CONTROL_RETRY);
                }
            }
        }
        if self.control_up {
            while let Some(next) = self.pending.pop_front() {
                match self.handle_desired(&next.payload).await {
                    Ok(()) => {
                        if let Some(publish) = &next.publish {
                            self.broker.ack(publish).await;
                        }
                    }
                    Err(e) => {
                        // Not handled: it stays first in line, unacknowledged.
                        self.pending.push_front(next);
                        self.control_lost(&e);
                        break;
                    }
                }
            }
        }
        if self.control_up && self.refresh_at.is_some_and(|at| at <= Instant::now()) {
            self.refresh_at = None;
            match self.refresh().await {
                Ok(()) => {}
                Err(ControlError::Refused(reason)) => {
                    tracing::warn!(
                        "cannot read the state for the status: {reason} (the connector's controlInterfaceAccess \
                         rules must allow reading {STATUS_MASKS:?}); trying again in {REFUSED_RETRY:?}"
                    );
                    self.refresh_at = Some(Instant::now() + REFUSED_RETRY);
                }
                Err(e) => self.control_lost(&e),
            }
        }
        if self.online
            && let Some(mut status) = self.pacer.take_due(Instant::now())
        {
            self.seq += 1;
            status.seq = self.seq;
            status.published_at = crate::payload::now();
            tracing::debug!("publishing status {} (ready: {})", status.seq, status.ready);
            let topic = self.settings.topics.vehicle(&self.settings.vehicle, VehicleTopic::Status);
            if let Err(e) = self.broker.publish(&topic, encode(&status), true).await {
                tracing::warn!("cannot publish the status: {e}");
                self.pacer.resend();
            }
        }
    }

    async fn on_link(&mut self, event: LinkEvent) {
        match event {
            LinkEvent::Connected { session_present } => {
                tracing::info!("connected to the broker (session present: {session_present})");
                self.online = true;
                self.announce().await;
                self.pacer.resend();
                self.schedule_refresh();
            }
            LinkEvent::Disconnected(why) => {
                if self.online {
                    tracing::warn!("broker link lost: {why}");
                }
                self.online = false;
            }
            LinkEvent::Message { topic, payload, publish } => {
                let desired = self.settings.topics.vehicle(&self.settings.vehicle, VehicleTopic::Desired);
                if topic == desired {
                    self.pending.push_back(Pending { payload, publish: Some(publish) });
                } else {
                    tracing::warn!("message on '{topic}' ignored: not this vehicle's desired topic");
                    self.broker.ack(&publish).await;
                }
            }
            LinkEvent::Refused { pkid, reason } => tracing::warn!("the broker refused publication {pkid}: {reason}"),
        }
    }

    /// Says who this vehicle is and that it is online, and subscribes.
    async fn announce(&mut self) {
        let s = &self.settings;
        let info = Info {
            version: PAYLOAD_VERSION,
            vehicle: s.vehicle.clone(),
            labels: s.labels.clone(),
            connector: env!("CARGO_PKG_VERSION").to_owned(),
        };
        let online = Online { version: PAYLOAD_VERSION, online: true };
        let results = [
            self.broker.publish(&s.topics.vehicle(&s.vehicle, VehicleTopic::Info), encode(&info), true).await,
            self.broker.publish(&s.topics.vehicle(&s.vehicle, VehicleTopic::Online), encode(&online), true).await,
            self.broker.subscribe(&s.topics.vehicle(&s.vehicle, VehicleTopic::Desired)).await,
        ];
        for e in results.into_iter().filter_map(Result::err) {
            tracing::warn!("announcing on the broker: {e}");
        }
    }

    fn reject(&mut self, id: &str, reason: String) {
        tracing::warn!("rollout '{id}' rejected: {reason}");
        self.last_rollout = Some(RolloutStatus { id: id.to_owned(), result: RolloutResult::Rejected, reason });
        self.schedule_refresh();
    }

    /// Handles one desired message; `Err` only when the control interface
    /// failed so that it must be tried again.
    async fn handle_desired(&mut self, payload: &[u8]) -> Result<(), ControlError> {
        if payload.len() > MAX_DESIRED_BYTES {
            let reason = format!(
                "desired message of {} bytes refused: larger than the {MAX_DESIRED_BYTES} bytes a connector reads",
                payload.len()
            );
            self.reject("", reason);
            return Ok(());
        }
        let desired: Desired = match decode(payload) {
            Ok(d) => d,
            Err(e) => {
                self.reject("", e.to_string());
                return Ok(());
            }
        };
        // An id that is not valid is not repeated in the status.
        let shown_id =
            if check_id("rollout id", &desired.rollout_id).is_ok() { desired.rollout_id.as_str() } else { "" };
        if let Some(key) = &self.settings.operator_key
            && let Err(e) = key.verify(&desired, &self.settings.vehicle)
        {
            let shown_id = shown_id.to_owned();
            self.reject(&shown_id, e.to_string());
            return Ok(());
        }
        let id = desired.rollout_id.clone();
        if let Err(e) = check_id("rollout id", &id) {
            self.reject("", e.to_string());
            return Ok(());
        }
        let state = match self.control.complete_state(&["desiredState.configs"]).await {
            Ok(state) => state,
            Err(ControlError::Refused(reason)) => {
                self.reject(&id, format!("cannot read the ledger (config '{LEDGER_CONFIG}'): {reason}"));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let ledger: Ledger = ledger_of(&state);
        if let Err(reason) = ledger.check() {
            self.reject(&id, reason);
            return Ok(());
        }
        if self.settings.operator_key.is_some() {
            let floor = self.seq_floor.max(ledger.seq);
            if desired.seq < floor {
                // Signed by the operator, but older than what this vehicle
                // accepted: a replay (or a late duplicate). Refused, and the
                // status keeps showing what is applied.
                tracing::warn!(
                    "rollout '{id}' refused as a replay: its sequence number {} is older than {floor}, the last \
                     this vehicle accepted",
                    desired.seq
                );
                return Ok(());
            }
            self.seq_floor = floor.max(desired.seq);
        }
        if ledger.has(&id) {
            if ledger.current.as_deref() == Some(id.as_str()) {
                tracing::info!("rollout '{id}' is applied already");
                self.last_rollout = Some(RolloutStatus { id, result: RolloutResult::Applied, reason: String::new() });
            } else {
                tracing::info!("rollout '{id}' was applied before a newer one; the replay is ignored");
            }
            self.schedule_refresh();
            return Ok(());
        }
        let plan = match plan(&desired, &ledger, &self.settings.apply) {
            Ok(p) => p,
            Err(reason) => {
                self.reject(&id, reason);
                return Ok(());
            }
        };
        match self.control.update_state(plan.new_state, plan.update_mask).await {
            Ok(job_id) => {
                tracing::info!("rollout '{id}' applied as job {job_id}");
                self.applied += 1;
                self.job_id = (job_id != 0).then_some(job_id);
                self.job_open = true;
                self.last_rollout = Some(RolloutStatus { id, result: RolloutResult::Applied, reason: String::new() });
                self.schedule_refresh();
                Ok(())
            }
            Err(ControlError::Refused(reason)) => {
                self.reject(&id, reason);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Looks at the state: the status for the pacer, fresh events out.
    async fn refresh(&mut self) -> Result<(), ControlError> {
        tracing::debug!("looking at the state");
        let state = self.control.complete_state(&STATUS_MASKS).await?;
        let mut status = compute(&self.settings.vehicle, self.seq, &state, self.last_rollout.as_ref(), self.job_id);
        status.accepted_seq = status.accepted_seq.max(self.seq_floor);
        self.job_open = status.job.as_ref().is_some_and(|j| !matches!(j.phase.as_str(), "Succeeded" | "Failed"));
        if self.job_open {
            let at = Instant::now() + JOB_POLL;
            self.refresh_at = Some(self.refresh_at.map_or(at, |r| r.min(at)));
        }
        self.pacer.offer(status);
        if self.online {
            let events = self.events.fresh(&state);
            if !events.is_empty() {
                let payload = Events { version: PAYLOAD_VERSION, vehicle: self.settings.vehicle.clone(), events };
                let topic = self.settings.topics.vehicle(&self.settings.vehicle, VehicleTopic::Events);
                if let Err(e) = self.broker.publish(&topic, encode(&payload), false).await {
                    tracing::warn!("cannot publish events: {e}");
                }
            }
        }
        Ok(())
    }
}
