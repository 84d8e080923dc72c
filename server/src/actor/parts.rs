//! The parts the actor's state is grouped into. Each part belongs to one
//! feature; the actor only holds them side by side. The lifecycle part is
//! the actor's own: its features borrow what they need from it and return
//! their effects. The streams part is in `streams.rs`.

use ank_common::daemon::Ping;
use tokio::sync::{mpsc, watch};

use super::{ServerCommand, ServerCounts};
use crate::connections::{Connections, Outbox};
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState, StateDiff};
use crate::health_gate::HealthGates;
use crate::health_gate::file::GateFile;
use crate::hooks::HooksRegistry;
use crate::hooks::flow::HookFlow;
use crate::placement::{PlacementSettings, Placer};
use crate::reaper::{Reaper, ReaperSettings};
use crate::seq_pools::SeqPools;
use crate::state_file::StateFile;
use crate::workload_states::{ResyncSettings, WorkloadStateStore};

/// What goes into the actor and out of it: the commands, the liveness
/// pings, the published counts, and the messages of the command at hand.
pub(super) struct Io {
    pub(super) rx: mpsc::Receiver<ServerCommand>,
    pub(super) pings: mpsc::Receiver<Ping>,
    pub(super) counts: watch::Sender<ServerCounts>,
    /// Delivered to the connections once per command.
    pub(super) out: Outbox,
}

impl Io {
    /// Sends what the command queued to the connections, and publishes the
    /// counts (`workloads` desired).
    pub(super) fn flush(&mut self, conns: &mut Connections, states: &WorkloadStateStore, workloads: usize) {
        let out = self.out.take();
        conns.deliver(out, states);
        let now = ServerCounts { agents: conns.agent_count(), workloads };
        self.counts.send_if_modified(|old| std::mem::replace(old, now) != now);
    }
}

/// The desired state in force, where it is saved, and the generation of
/// every desired workload.
pub(super) struct Desired {
    pub(super) current: DesiredState,
    /// Where accepted desired states are saved, if anywhere.
    pub(super) file: Option<StateFile>,
    pub(super) generations: Generations,
}

/// What a switch to a new desired state changed.
pub(super) struct Switched {
    /// The state in force before.
    pub(super) old: DesiredState,
    /// The instances added and deleted, by agent.
    pub(super) diff: StateDiff,
    /// The generations before.
    pub(super) generations_before: Generations,
}

impl Desired {
    /// Makes `next` (saved already) the current state: a workload whose
    /// spec changed gets the generation after the highest one known
    /// (`states` knows what the agents reported).
    pub(super) fn switch(&mut self, next: DesiredState, states: &WorkloadStateStore) -> Switched {
        let diff = desired_state::diff(&self.current.rendered, &next.rendered);
        let generations_before = self.generations.clone();
        self.generations.advance(&self.current.rendered, &next.rendered, |name| states.max_generation(name));
        let old = std::mem::replace(&mut self.current, next);
        Switched { old, diff, generations_before }
    }
}

/// What the features start with besides the desired state: the `${seq:N}`
/// pools, the reaper's and placement's settings, the mutating hooks and
/// the stream limits.
#[derive(Debug, Default)]
pub struct LifecycleOptions {
    /// The `${seq:N}` pools (kept next to the state file, if any).
    pub seq: SeqPools,
    /// The reaper of finished workloads.
    pub reaper: ReaperSettings,
    /// Placement's settings, if not the defaults (taken after the startup
    /// state was placed with the defaults; the seed restarts the
    /// generator).
    pub placement: Option<PlacementSettings>,
    /// The mutating hooks run on every update that changes workloads.
    pub hooks: HooksRegistry,
    /// How many event subscriptions and log requests one connection may
    /// keep open.
    pub stream_limits: crate::stream_limits::StreamLimits,
}

/// The features that look after the desired workloads over their
/// lifetime: resync, `${seq:N}` numbers, the reaper, placement and the
/// health gates.
pub(super) struct Lifecycle {
    /// When the server re-sends a spec nobody confirmed.
    pub(super) resync: ResyncSettings,
    /// The `${seq:N}` numbers of the workloads.
    pub(super) seq: SeqPools,
    /// When finished workloads are deleted.
    pub(super) reaper: Reaper,
    /// Placement of the workloads with an agent selector.
    pub(super) placer: Placer,
    /// The health gates of updated workloads and their last healthy specs.
    pub(super) gates: HealthGates,
    /// Where the open gates are saved (next to the state file), if anywhere.
    pub(super) gate_file: Option<GateFile>,
}

/// The mutating hooks and the chain of them running.
#[derive(Default)]
pub(super) struct Hooks {
    /// Empty: updates never wait for a hook.
    pub(super) registry: HooksRegistry,
    /// The chain running, and the updates waiting for it.
    pub(super) flow: HookFlow<super::change::Prepared>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired(runtime_config: &str) -> DesiredState {
        let yaml = format!(
            "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    runtimeConfig: {runtime_config}\n"
        );
        DesiredState::new(ank_common::manifest::parse_manifest("t", &yaml).unwrap()).unwrap()
    }

    // A switch makes the new state current and returns what the features
    // follow up on: the old state, the instances added and deleted, and the
    // generations before (a changed spec gets the next generation).
    #[test]
    fn a_switch_returns_the_old_state_the_diff_and_the_generations_before() {
        let mut d = Desired { current: DesiredState::default(), file: None, generations: Generations::default() };
        let states = WorkloadStateStore::default();
        let first = d.switch(desired("x"), &states);
        assert_eq!(first.old, DesiredState::default());
        assert_eq!(first.diff.added_instance_names().len(), 1);
        assert!(first.diff.deleted_instance_names().is_empty());
        assert_eq!(first.generations_before.of("w"), None);
        assert_eq!(d.generations.of("w"), Some(1));
        let second = d.switch(desired("y"), &states);
        assert_eq!(second.old, desired("x"));
        assert_eq!((second.diff.added_instance_names().len(), second.diff.deleted_instance_names().len()), (1, 1));
        assert_eq!(second.generations_before.of("w"), Some(1));
        assert_eq!(d.generations.of("w"), Some(2));
        assert_eq!(d.current, desired("y"));
    }
}
