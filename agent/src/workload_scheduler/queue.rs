//! [`Queue`]: the workload operations the scheduler holds back, at most one
//! per workload name, each with its arrival number. Creates start in
//! (start priority descending, arrival ascending) order (feature K1); each
//! remembers why it waits ([`Hold`], shown as its execution state), since
//! when it is quota-blocked and until when it was preempted.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use crate::runtime_connectors::RuntimeError;
use crate::workload_operation::ReusableWorkloadSpec;

/// A queued operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Queued {
    Create(ReusableWorkloadSpec),
    Update(WorkloadSpec, DeletedWorkload),
    Delete(DeletedWorkload),
}

/// Why a queued operation waits; shown as its execution state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Its dependencies do not hold yet.
    WaitingToStart,
    /// Its dependents do not let it go yet (deletes, the delete half of updates).
    WaitingToStop,
    /// No room in the agent's quota; the reason says whose ("agent_A 2/2").
    QuotaBlocked(String),
    /// Held back by an isolated job ("isolated: flash-ecu").
    Postponed(String),
    /// Preempted and kept from starting for the postpone time; its control
    /// loop reports the state (when its container is gone).
    Preempted,
    /// It cannot be accounted (its declared memory does not read).
    Invalid(String),
}

impl Hold {
    /// The execution state that shows it.
    pub fn state(&self) -> ExecutionState {
        let with_info = |kind, info: &str| ExecutionState::with_info(kind, info);
        match self {
            Hold::WaitingToStart => ExecutionState::new(StateKind::Pending(Pending::WaitingToStart)),
            Hold::WaitingToStop => ExecutionState::new(StateKind::Stopping(Stopping::WaitingToStop)),
            Hold::QuotaBlocked(reason) => with_info(StateKind::Pending(Pending::QuotaBlocked), reason),
            Hold::Postponed(reason) => with_info(StateKind::Pending(Pending::Postponed), reason),
            Hold::Preempted => ExecutionState::new(StateKind::Pending(Pending::Preempted)),
            Hold::Invalid(reason) => with_info(StateKind::Pending(Pending::StartingFailed), reason),
        }
    }

    /// The event it is counted as, once when it begins and once per tick.
    pub fn event(&self) -> Option<(EventKind, &str)> {
        match self {
            Hold::QuotaBlocked(reason) => Some((EventKind::QuotaBlocked, reason)),
            Hold::Postponed(reason) => Some((EventKind::Postponed, reason)),
            _ => None,
        }
    }

    /// Whether the scheduler must look at it again on its tick.
    pub fn needs_tick(&self) -> bool {
        matches!(self, Hold::QuotaBlocked(_) | Hold::Postponed(_) | Hold::Preempted)
    }
}

/// One queued operation with its bookkeeping.
#[derive(Debug, Clone)]
pub struct Entry {
    pub op: Queued,
    /// Arrival number: earlier first among equal priorities.
    pub seq: u64,
    /// The hold last reported for it.
    pub shown: Option<Hold>,
    /// When it became quota-blocked (for the preemption delay).
    pub blocked_since: Option<Instant>,
    /// Kept from starting until then: it was preempted.
    pub preempted_until: Option<Instant>,
    /// Declared memory of a create, read once.
    pub memory: Result<u64, RuntimeError>,
}

impl Entry {
    /// The spec of a create.
    pub fn create_spec(&self) -> Option<&WorkloadSpec> {
        match &self.op {
            Queued::Create(r) => Some(&r.spec),
            Queued::Update(..) | Queued::Delete(_) => None,
        }
    }
}

/// The held-back operations by workload name.
#[derive(Debug, Default)]
pub struct Queue {
    entries: BTreeMap<String, Entry>,
    seq: u64,
}

impl Queue {
    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Queues a create. A create that replaces a queued create of the same
    /// workload keeps its place in the queue (and a preemption's postpone);
    /// it is shown again unless it is the same spec. It also keeps what the
    /// replaced one had to deal with first (a container of an earlier agent
    /// run, e.g. a dead one after a power cut), unless it brings its own: a
    /// server resync re-sending a waiting workload must not leave that
    /// container behind, blocking the name or running beside the new one.
    pub fn insert_create(
        &mut self,
        mut r: ReusableWorkloadSpec,
        memory: Result<u64, RuntimeError>,
        previous: Option<Entry>,
    ) {
        let name = r.spec.name().to_owned();
        let (seq, kept) = match previous {
            Some(Entry { op: Queued::Create(old), seq, shown, blocked_since, preempted_until, .. }) => {
                let same = old.spec == r.spec;
                if r.earlier.is_none() {
                    r.earlier = old.earlier.map(|e| e.for_spec(&old.spec, &r.spec));
                }
                (seq, Some((same.then_some((shown, blocked_since)), preempted_until)))
            }
            _ => (self.next_seq(), None),
        };
        let mut entry =
            Entry { seq, op: Queued::Create(r), shown: None, blocked_since: None, preempted_until: None, memory };
        if let Some((same, preempted_until)) = kept {
            if let Some((shown, blocked_since)) = same {
                entry.shown = shown;
                entry.blocked_since = blocked_since;
            }
            entry.preempted_until = preempted_until;
        }
        self.entries.insert(name, entry);
    }

    /// Queues a preempted workload's create at the end of its priority,
    /// kept from starting until `until` (its loop shows `Pending(Preempted)`).
    pub fn insert_preempted(&mut self, spec: WorkloadSpec, memory: u64, until: Instant) {
        let seq = self.next_seq();
        let entry = Entry {
            op: Queued::Create(ReusableWorkloadSpec::new(spec)),
            seq,
            shown: Some(Hold::Preempted),
            blocked_since: None,
            preempted_until: Some(until),
            memory: Ok(memory),
        };
        if let Some(name) = entry.create_spec().map(|s| s.name().to_owned()) {
            self.entries.insert(name, entry);
        }
    }

    /// Queues an update or a delete, shown as `shown`.
    pub fn insert_waiting(&mut self, name: String, op: Queued, shown: Hold) {
        let seq = self.next_seq();
        let entry = Entry { op, seq, shown: Some(shown), blocked_since: None, preempted_until: None, memory: Ok(0) };
        self.entries.insert(name, entry);
    }

    pub fn remove(&mut self, name: &str) -> Option<Entry> {
        self.entries.remove(name)
    }

    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut Entry> {
        self.entries.get_mut(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.entries.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Names of the queued updates and deletes.
    pub fn waiting_to_stop(&self) -> Vec<String> {
        self.entries.iter().filter(|(_, e)| e.create_spec().is_none()).map(|(n, _)| n.clone()).collect()
    }

    /// Names of the queued creates in start order: start priority
    /// descending, then arrival.
    // [feature K1: start order is priority, then apply order]
    pub fn creates_in_order(&self) -> Vec<String> {
        let mut creates: Vec<(Reverse<u32>, u64, &String)> = self
            .entries
            .iter()
            .filter_map(|(name, e)| Some((Reverse(e.create_spec()?.workload.start_priority()), e.seq, name)))
            .collect();
        creates.sort_unstable();
        creates.into_iter().map(|(_, _, name)| name.clone()).collect()
    }

    /// Whether some entry must be looked at again on the tick.
    pub fn needs_tick(&self) -> bool {
        self.entries.values().any(|e| e.shown.as_ref().is_some_and(Hold::needs_tick))
    }
}
