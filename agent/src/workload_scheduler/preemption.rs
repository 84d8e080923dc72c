//! Which running workloads a tick preempts (feature K4). A workload that has
//! been quota-blocked for at least the preemption delay and may preempt
//! (the agent's preemption is enabled, or its own `policy.preemptEnabled`)
//! stops victims until it fits: running workloads with a strictly lower
//! start priority that are not exempt, lowest priority first, then the
//! latest started first. Exempt are workloads with `policy.preemptExempt`
//! and, for safety, every workload that a running workload of this agent
//! depends on. One tick stops at most `max(1, ceil(rate % x candidates))`
//! victims; no victim is stopped for a blocked workload that would not fit
//! even after stopping every candidate it may stop.

use std::collections::BTreeSet;

use super::quota::Room;
use super::settings::PreemptionSettings;
use super::slots::{Slot, Slots};
use crate::workload_state_store::WorkloadStateStore;

/// A quota-blocked workload that may preempt now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocker {
    pub name: String,
    pub priority: u32,
    pub memory: u64,
}

/// One decided preemption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    pub victim: String,
    pub by: String,
    pub by_priority: u32,
}

impl Preemption {
    /// The reason of the victim's `Preempted` event: "by nav (prio 9)".
    pub fn reason(&self) -> String {
        format!("by {} (prio {})", self.by, self.by_priority)
    }
}

/// The running workloads that may be preempted, in the order they are:
/// lowest start priority first, then the latest started first. `busy`
/// workloads (an operation of theirs is queued) are left alone.
fn candidates<'a>(slots: &'a Slots, store: &WorkloadStateStore, busy: impl Fn(&str) -> bool) -> Vec<&'a Slot> {
    let running: Vec<&Slot> = slots.iter().filter(|s| s.is_running(store)).collect();
    // [feature K4: a dependency of a running workload is implicitly exempt]
    let needed: BTreeSet<&str> =
        running.iter().flat_map(|s| s.spec.workload.dependencies.keys().map(|d| d.as_str())).collect();
    let mut out: Vec<&Slot> = running
        .into_iter()
        .filter(|s| !s.spec.workload.policy.preempt_exempt && !needed.contains(s.spec.name()))
        .filter(|s| !busy(s.spec.name()))
        .collect();
    out.sort_by_key(|s| (s.priority(), std::cmp::Reverse(s.started)));
    out
}

/// The victims of one tick for `blockers` (in start order). `room` holds
/// what the occupying workloads use, `releasing` what preempted ones still
/// use until their containers are gone (they count as freed here).
// [feature K4: victims, their order and the rate per tick]
pub fn plan(
    blockers: &[Blocker],
    slots: &Slots,
    store: &WorkloadStateStore,
    room: &Room<'_>,
    releasing: (u32, u64),
    settings: &PreemptionSettings,
    busy: impl Fn(&str) -> bool,
) -> Vec<Preemption> {
    let Some(top) = blockers.iter().map(|b| b.priority).max() else { return Vec::new() };
    let candidates = candidates(slots, store, busy);
    let cap = settings.victims_per_tick(candidates.iter().filter(|s| s.priority() < top).count());
    let mut room = room.clone();
    room.give_back(releasing.0, releasing.1);
    let mut chosen: Vec<Preemption> = Vec::new();
    for blocker in blockers {
        let (mut count, mut bytes) = room.shortfall(blocker.memory);
        if (count, bytes) == (0, 0) {
            // Fits once the releasing containers are gone: hold its place.
            room.take(blocker.memory);
            continue;
        }
        let taken = |s: &&&Slot| chosen.iter().any(|p| p.victim == s.spec.name());
        let eligible: Vec<&Slot> =
            candidates.iter().filter(|s| s.priority() < blocker.priority).filter(|s| !taken(s)).copied().collect();
        let total: (u32, u64) = (eligible.len() as u32, eligible.iter().map(|s| s.memory).sum());
        if total.0 < count || total.1 < bytes {
            continue;
        }
        for victim in eligible {
            if chosen.len() >= cap || (count, bytes) == (0, 0) {
                break;
            }
            if count == 0 && victim.memory == 0 {
                continue; // stopping it frees no memory
            }
            count = count.saturating_sub(1);
            bytes = bytes.saturating_sub(victim.memory);
            room.give_back(1, victim.memory);
            chosen.push(Preemption {
                victim: victim.spec.name().to_owned(),
                by: blocker.name.clone(),
                by_priority: blocker.priority,
            });
        }
        if (count, bytes) == (0, 0) {
            room.take(blocker.memory);
        }
        if chosen.len() >= cap {
            break;
        }
    }
    chosen
}
