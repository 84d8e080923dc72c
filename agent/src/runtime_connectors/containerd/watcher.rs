//! The containerd state watcher: one `Events.Subscribe` stream for the
//! agent's namespace (task create/start/exit/pause and container delete),
//! turned into `RuntimeEvent::Changed` for the agent's containers, plus a
//! listing (`Containers.List` + `Tasks.List`) every reconcile interval and
//! after every reconnect, sent as a `RuntimeEvent::Snapshot`. No process is
//! started: an exit reaches the agent as fast as containerd publishes it.
//!
//! An event names only the container id; the watcher keeps the id -> instance
//! name map from its listings and asks `Containers.Get` for an id it has not
//! seen (a container created since). Containers of others in the namespace
//! (no `agent` label of this agent) are remembered as such and ignored.
//!
//! When containerd cannot be reached the watcher says so once
//! (`RuntimeEvent::Health`) and subscribes again every
//! [`RESUBSCRIBE`]; an agent on a node without containerd (no socket) says
//! nothing: a podman-only node's health stays as it is.

use std::collections::HashMap;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use ank_common::conditions::RuntimeHealth;
use tokio_util::sync::CancellationToken;

use super::client::Containerd;
use super::listing;
use super::states::{event_filters, observed_from};
use crate::runtime_connectors::{RuntimeEvent, RuntimeEventSender, WorkloadId};

/// How long the watcher waits before subscribing again.
pub const RESUBSCRIBE: Duration = Duration::from_secs(1);

/// How often a missing containerd socket is looked for.
pub const ABSENT_POLL: Duration = Duration::from_secs(10);

/// The watcher of one agent's containers.
pub struct Watcher {
    pub cd: Containerd,
    pub runtime: String,
    pub agent: String,
    pub sink: RuntimeEventSender,
    pub shutdown: CancellationToken,
    pub reconcile_interval: Duration,
    /// Container id -> its instance (`None`: not one of this agent's).
    names: HashMap<String, Option<WorkloadInstanceName>>,
    /// What was last said about reachability (`None`: nothing yet).
    reachable: Option<bool>,
    /// Run before each listing (the connector's network sweep).
    pub sweep: Option<Sweep>,
}

/// A task the watcher runs before each listing.
pub type Sweep = Box<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

impl Watcher {
    /// A watcher of `agent`'s containers sending to `sink`.
    pub fn new(
        cd: Containerd,
        runtime: &str,
        agent: &str,
        sink: RuntimeEventSender,
        shutdown: CancellationToken,
        reconcile_interval: Duration,
    ) -> Self {
        Self {
            cd,
            runtime: runtime.to_owned(),
            agent: agent.to_owned(),
            sink,
            shutdown,
            reconcile_interval,
            names: HashMap::new(),
            reachable: None,
            sweep: None,
        }
    }

    /// Subscribes once (so that nothing after this call is missed when
    /// containerd answers) and runs the watcher in a task of its own.
    pub async fn start(mut self) {
        let first = if self.cd.address().exists() {
            self.cd.subscribe(event_filters(self.cd.namespace())).await
        } else {
            Err(super::client::CallError {
                call: "Events.Subscribe",
                code: super::client::CodeName::Unavailable,
                message: format!("no containerd socket at '{}'", self.cd.address().display()),
            })
        };
        if let Err(e) = &first {
            self.unreachable(e.to_string()).await;
        }
        tokio::spawn(async move {
            let mut stream = first.ok();
            loop {
                if let Some(s) = stream.take() {
                    self.set_reachable().await;
                    self.follow(s).await;
                }
                if self.shutdown.is_cancelled() {
                    return;
                }
                // No socket (no containerd on this node, or not yet): a
                // look every ABSENT_POLL costs next to nothing.
                let pause = if self.cd.address().exists() { RESUBSCRIBE } else { ABSENT_POLL };
                tokio::select! {
                    () = self.shutdown.cancelled() => return,
                    () = tokio::time::sleep(pause) => {}
                }
                match self.cd.subscribe(event_filters(self.cd.namespace())).await {
                    Ok(s) => {
                        // Changes while unsubscribed come from a listing.
                        stream = Some(s);
                        self.reconcile().await;
                    }
                    Err(e) => self.unreachable(e.to_string()).await,
                }
            }
        });
    }

    /// Reads the stream until it ends (containerd went away) or shutdown.
    async fn follow(&mut self, mut stream: tonic::Streaming<containerd_client::types::Envelope>) {
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + self.reconcile_interval, self.reconcile_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                _ = tick.tick() => self.reconcile().await,
                msg = stream.message() => match msg {
                    Ok(Some(envelope)) => {
                        if let Some((id, observed)) = observed_from(&envelope)
                            && let Some(instance_name) = self.instance_of(&id).await
                        {
                            if observed == crate::runtime_connectors::Observed::Gone {
                                self.names.remove(&id);
                            }
                            let ev = RuntimeEvent::Changed { instance_name, workload_id: WorkloadId(id), observed };
                            if self.sink.send(ev).await.is_err() {
                                self.shutdown.cancel();
                            }
                        }
                    }
                    Ok(None) => {
                        self.unreachable("containerd ended the event stream".to_owned()).await;
                        return;
                    }
                    Err(status) => {
                        self.unreachable(format!("containerd's event stream failed: {}", status.message())).await;
                        return;
                    }
                }
            }
        }
    }

    /// The instance of the container `id`, if it is one of this agent's.
    async fn instance_of(&mut self, id: &str) -> Option<WorkloadInstanceName> {
        if let Some(known) = self.names.get(id) {
            return known.clone();
        }
        let instance = match self.cd.container(id).await {
            Ok(Some(c)) => listing::instance_of(&c.labels, &self.agent),
            // Gone already (a delete event of a container never seen).
            Ok(None) => return None,
            Err(e) => {
                tracing::debug!("containerd: cannot read container '{id}': {e}");
                return None;
            }
        };
        self.names.insert(id.to_owned(), instance.clone());
        instance
    }

    /// Lists the agent's containers and sends the listing; releases the
    /// networks of containers removed behind the agent's back.
    async fn reconcile(&mut self) {
        if let Some(sweep) = &self.sweep {
            sweep().await;
        }
        let taken_at = tokio::time::Instant::now();
        match listing::list(&self.cd, &self.agent).await {
            Ok(workloads) => {
                self.names.retain(|_, v| v.is_none());
                for w in &workloads {
                    self.names.insert(w.workload_id.0.clone(), Some(w.instance_name.clone()));
                }
                self.set_reachable().await;
                let ev = RuntimeEvent::Snapshot { runtime: self.runtime.clone(), taken_at, workloads };
                if self.sink.send(ev).await.is_err() {
                    self.shutdown.cancel();
                }
            }
            Err(e) => self.unreachable(e.to_string()).await,
        }
    }

    async fn unreachable(&mut self, why: String) {
        if !self.cd.address().exists() && self.reachable != Some(true) {
            // No containerd on this node: nothing to say.
            tracing::debug!("containerd: {why}");
            return;
        }
        tracing::warn!("containerd: {why}");
        self.report(false, RuntimeHealth::Unreachable(why)).await;
    }

    async fn set_reachable(&mut self) {
        if self.reachable != Some(true) {
            self.report(true, RuntimeHealth::Reachable).await;
        }
    }

    async fn report(&mut self, reachable: bool, health: RuntimeHealth) {
        if self.reachable == Some(reachable) {
            return;
        }
        // The first "reachable" is the default: not worth an event.
        let tell = !(reachable && self.reachable.is_none());
        self.reachable = Some(reachable);
        if tell {
            let _ = self.sink.send(RuntimeEvent::Health { runtime: self.runtime.clone(), health }).await;
        }
    }
}
