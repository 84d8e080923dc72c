//! Workload events (the tackle2-hub model): `{kind, reason, count,
//! firstSeen, last}` entries, where the same kind with the same reason only
//! bumps `count` and `last`, kept per workload in a bounded [`EventRing`].

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// How many events a workload keeps by default.
pub const DEFAULT_EVENT_CAPACITY: usize = 32;

/// What happened to a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventKind {
    Scheduled,
    Unschedulable,
    Rescheduled,
    Started,
    Restarted,
    BackOff,
    ImageError,
    QuotaBlocked,
    Escalated,
    Postponed,
    Preempted,
    Canceled,
    Reaped,
    DependencyWaiting,
    AgentDisconnected,
    /// A probe failed (its output in the reason).
    Unhealthy,
    /// A restart waits out the crash-loop backoff, or its limit was reached.
    CrashLoop,
    /// A gated update did not become healthy and the last healthy spec was put back.
    Reverted,
    /// A gated update became healthy in time.
    UpdateHealthy,
}

const ALL_KINDS: [EventKind; 19] = [
    EventKind::Scheduled,
    EventKind::Unschedulable,
    EventKind::Rescheduled,
    EventKind::Started,
    EventKind::Restarted,
    EventKind::BackOff,
    EventKind::ImageError,
    EventKind::QuotaBlocked,
    EventKind::Escalated,
    EventKind::Postponed,
    EventKind::Preempted,
    EventKind::Canceled,
    EventKind::Reaped,
    EventKind::DependencyWaiting,
    EventKind::AgentDisconnected,
    EventKind::Unhealthy,
    EventKind::CrashLoop,
    EventKind::Reverted,
    EventKind::UpdateHealthy,
];

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Scheduled => "Scheduled",
            EventKind::Unschedulable => "Unschedulable",
            EventKind::Rescheduled => "Rescheduled",
            EventKind::Started => "Started",
            EventKind::Restarted => "Restarted",
            EventKind::BackOff => "BackOff",
            EventKind::ImageError => "ImageError",
            EventKind::QuotaBlocked => "QuotaBlocked",
            EventKind::Escalated => "Escalated",
            EventKind::Postponed => "Postponed",
            EventKind::Preempted => "Preempted",
            EventKind::Canceled => "Canceled",
            EventKind::Reaped => "Reaped",
            EventKind::DependencyWaiting => "DependencyWaiting",
            EventKind::AgentDisconnected => "AgentDisconnected",
            EventKind::Unhealthy => "Unhealthy",
            EventKind::CrashLoop => "CrashLoop",
            EventKind::Reverted => "Reverted",
            EventKind::UpdateHealthy => "UpdateHealthy",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        ALL_KINDS.into_iter().find(|k| k.as_str() == s)
    }
}

/// One merged event.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadEvent {
    pub kind: EventKind,
    pub reason: String,
    pub count: u64,
    /// RFC 3339 time of the first occurrence.
    pub first_seen: String,
    /// RFC 3339 time of the latest occurrence.
    pub last: String,
}

impl WorkloadEvent {
    fn same(&self, kind: EventKind, reason: &str) -> bool {
        self.kind == kind && self.reason == reason
    }
}

/// The newest events of one workload, oldest first, at most `capacity`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRing {
    entries: VecDeque<WorkloadEvent>,
    capacity: usize,
}

impl Default for EventRing {
    fn default() -> Self {
        Self::new(DEFAULT_EVENT_CAPACITY)
    }
}

impl EventRing {
    pub fn new(capacity: usize) -> Self {
        Self { entries: VecDeque::new(), capacity: capacity.max(1) }
    }

    /// Records one occurrence at `at` (RFC 3339) and returns the merged
    /// entry: an entry of the same kind and reason counts up and becomes the
    /// newest, otherwise a new one is added and the oldest dropped when full.
    pub fn record(&mut self, kind: EventKind, reason: &str, at: &str) -> &WorkloadEvent {
        let entry = match self.entries.iter().position(|e| e.same(kind, reason)) {
            Some(i) => {
                let mut e = self.entries.remove(i).unwrap_or_else(|| unreachable!("index from position"));
                e.count += 1;
                e.last = at.to_owned();
                e
            }
            None => WorkloadEvent {
                kind,
                reason: reason.to_owned(),
                count: 1,
                first_seen: at.to_owned(),
                last: at.to_owned(),
            },
        };
        self.push(entry)
    }

    /// Takes over an entry another ring merged (an agent's): it replaces
    /// the entry of the same kind and reason.
    pub fn merge(&mut self, entry: WorkloadEvent) {
        if let Some(i) = self.entries.iter().position(|e| e.same(entry.kind, &entry.reason)) {
            self.entries.remove(i);
        }
        self.push(entry);
    }

    fn push(&mut self, entry: WorkloadEvent) -> &WorkloadEvent {
        self.entries.push_back(entry);
        while self.entries.len() > self.capacity {
            self.entries.pop_front();
        }
        self.entries.back().unwrap_or_else(|| unreachable!("just pushed"))
    }

    /// The entry of `kind` and `reason`, if kept.
    pub fn get(&self, kind: EventKind, reason: &str) -> Option<&WorkloadEvent> {
        self.entries.iter().find(|e| e.same(kind, reason))
    }

    /// Entries oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &WorkloadEvent> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A copy of the entries, oldest first.
    pub fn to_vec(&self) -> Vec<WorkloadEvent> {
        self.entries.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature K8: same kind and reason merge; count and last follow the newest]
    #[test]
    fn repeats_merge_into_one_entry() {
        let mut ring = EventRing::default();
        for i in 1..=6 {
            ring.record(EventKind::Restarted, "exit code 1", &format!("t{i}"));
        }
        assert_eq!(ring.len(), 1);
        let e = ring.get(EventKind::Restarted, "exit code 1").unwrap();
        assert_eq!((e.count, e.first_seen.as_str(), e.last.as_str()), (6, "t1", "t6"));
        ring.record(EventKind::Restarted, "exit code 2", "t7");
        assert_eq!(ring.len(), 2, "another reason is another entry");
    }

    // [test of feature K8: the ring keeps only the newest 32]
    #[test]
    fn ring_is_bounded_and_keeps_the_newest() {
        let mut ring = EventRing::default();
        for i in 0..40 {
            ring.record(EventKind::BackOff, &format!("r{i}"), "t");
        }
        assert_eq!(ring.len(), 32);
        assert_eq!(ring.iter().next().unwrap().reason, "r8");
        // A repeat of a kept entry makes it the newest instead of dropping.
        ring.record(EventKind::BackOff, "r8", "t2");
        assert_eq!(ring.iter().last().unwrap().reason, "r8");
        assert_eq!(ring.len(), 32);
    }

    #[test]
    fn merge_replaces_the_entry_of_the_same_kind_and_reason() {
        let mut ring = EventRing::new(4);
        ring.record(EventKind::QuotaBlocked, "agent_A 2/2", "t1");
        let mut from_agent = ring.get(EventKind::QuotaBlocked, "agent_A 2/2").unwrap().clone();
        from_agent.count = 5;
        from_agent.last = "t5".into();
        ring.merge(from_agent);
        assert_eq!(ring.len(), 1);
        assert_eq!(ring.get(EventKind::QuotaBlocked, "agent_A 2/2").unwrap().count, 5);
        for k in ["Scheduled", "Canceled", "Reaped"] {
            assert_eq!(EventKind::parse(k).unwrap().as_str(), k);
        }
        assert_eq!(EventKind::parse("Nope"), None);
    }
}
