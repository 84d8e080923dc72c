//! Generations and conditions of workload instances (the HyperFleet model):
//! what an agent attaches to a state report ([`InstanceStatus`] with
//! `observedGeneration` and the Applied / Available / Health conditions),
//! how those conditions follow from an execution state, and the rules by
//! which the server merges a report into what it knows ("Unknown is not
//! news") and derives Ready.

use serde::{Deserialize, Serialize};

use crate::execution_state::{ExecutionState, Pending, StateKind};

/// The kinds of condition; an instance has at most one of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConditionType {
    /// The runtime accepted the spec (container or pod created).
    Applied,
    /// Last known good: running, or finished as its restart policy expects.
    Available,
    /// The agent's own view: its runtime is reachable.
    Health,
    /// Available at the workload's current generation (server only).
    Ready,
}

/// The types an agent must report, in order.
pub const AGENT_CONDITIONS: [ConditionType; 3] =
    [ConditionType::Applied, ConditionType::Available, ConditionType::Health];

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Applied => "Applied",
            ConditionType::Available => "Available",
            ConditionType::Health => "Health",
            ConditionType::Ready => "Ready",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [ConditionType::Applied, ConditionType::Available, ConditionType::Health, ConditionType::Ready]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// True, False or Unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConditionStatus {
    #[default]
    Unknown,
    True,
    False,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::Unknown => "Unknown",
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
        }
    }
}

/// One condition of a workload instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: ConditionType,
    pub status: ConditionStatus,
    #[serde(default)]
    pub observed_generation: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed (RFC 3339; set by the server).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
    /// When a report last confirmed it (RFC 3339; set by the server).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_updated_time: String,
}

impl Condition {
    pub fn new(kind: ConditionType, status: ConditionStatus, generation: u64, reason: &str, message: &str) -> Self {
        Self {
            kind,
            status,
            observed_generation: generation,
            reason: reason.to_owned(),
            message: message.to_owned(),
            last_transition_time: String::new(),
            last_updated_time: String::new(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What this orchestrator adds to a workload instance's execution state:
/// in a report the agent's `observedGeneration` and conditions, in the
/// complete state also the workload's current `generation` and how often
/// the server re-sent the spec (`resyncs`). Empty for Ankaios peers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub observed_generation: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resyncs: u64,
    /// From an agent: events that changed since its last report; in the
    /// complete state: the workload's kept events, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::workload_events::WorkloadEvent>,
    /// In the complete state: the workload's health-gated update failed
    /// (and, with `autoRevert`, its last healthy spec was put back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<RevertMark>,
}

/// The mark of a workload whose gated update did not become healthy in time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevertMark {
    /// The generation that failed its gate.
    pub from_generation: u64,
    /// The generation whose spec was put back; 0 when nothing was.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub to_generation: u64,
    /// Why, as the `Reverted` event says it.
    pub reason: String,
    /// When (RFC 3339).
    pub at: String,
}

impl InstanceStatus {
    /// The condition of one type, if known.
    pub fn condition(&self, kind: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.kind == kind)
    }

    /// The status of one condition (Unknown if absent).
    pub fn status_of(&self, kind: ConditionType) -> ConditionStatus {
        self.condition(kind).map_or(ConditionStatus::Unknown, |c| c.status)
    }

    /// Whether this is a report of this orchestrator's agents (it has an
    /// observedGeneration); Ankaios agents send none.
    pub fn is_extended(&self) -> bool {
        self.observed_generation != 0 || !self.conditions.is_empty()
    }

    /// The agent condition a report lacks, if any; a report with none at
    /// all is an Ankaios agent's and is accepted as it is.
    // [feature H4: an agent reports Applied, Available and Health]
    pub fn missing_agent_condition(&self) -> Option<ConditionType> {
        if self.conditions.is_empty() {
            return None;
        }
        AGENT_CONDITIONS.into_iter().find(|t| self.condition(*t).is_none())
    }
}

/// The runtime's reachability as the agent last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RuntimeHealth {
    #[default]
    Reachable,
    /// The runtime could not be reached; the text says why.
    Unreachable(String),
}

/// The Applied, Available and Health conditions an execution state
/// implies at `generation`.
pub fn agent_conditions(state: &ExecutionState, generation: u64, health: &RuntimeHealth) -> Vec<Condition> {
    use ConditionStatus::{False, True, Unknown};
    let (name, sub) = state.kind.names();
    let reason = if sub == "Ok" || sub == name { name.to_owned() } else { format!("{name}{sub}") };
    let message = state.to_string();
    let (applied, available) = match state.kind {
        StateKind::Running | StateKind::Succeeded => (True, True),
        StateKind::Failed(_) => (True, False),
        // No container: it failed to start, will not run, waits for room
        // or its turn, was stopped for a higher priority, or is gone.
        StateKind::Pending(
            Pending::StartingFailed
            | Pending::Canceled
            | Pending::QuotaBlocked
            | Pending::Preempted
            | Pending::Postponed,
        )
        | StateKind::Removed
        | StateKind::NotScheduled => (False, False),
        StateKind::Pending(Pending::Initial | Pending::WaitingToStart | Pending::Starting) | StateKind::Stopping(_) => {
            (Unknown, Unknown)
        }
        StateKind::AgentDisconnected => (Unknown, Unknown),
    };
    let health = match health {
        RuntimeHealth::Reachable => Condition::new(ConditionType::Health, True, generation, "RuntimeReachable", ""),
        RuntimeHealth::Unreachable(why) => {
            Condition::new(ConditionType::Health, False, generation, "RuntimeUnreachable", why)
        }
    };
    vec![
        Condition::new(ConditionType::Applied, applied, generation, &reason, &message),
        Condition::new(ConditionType::Available, available, generation, &reason, &message),
        health,
    ]
}

/// Merges one reported condition into `stored` at time `now`; returns
/// whether anything changed. Unknown does not overwrite a known True or
/// False and does not refresh its `lastUpdatedTime`.
// [feature H5: Unknown is not news]
pub fn merge(stored: &mut Vec<Condition>, mut incoming: Condition, now: &str) -> bool {
    let Some(old) = stored.iter_mut().find(|c| c.kind == incoming.kind) else {
        incoming.last_transition_time = now.to_owned();
        incoming.last_updated_time = now.to_owned();
        stored.push(incoming);
        stored.sort_by_key(|c| c.kind);
        return true;
    };
    if incoming.status == ConditionStatus::Unknown && old.status != ConditionStatus::Unknown {
        return false;
    }
    incoming.last_transition_time =
        if incoming.status == old.status { old.last_transition_time.clone() } else { now.to_owned() };
    incoming.last_updated_time = now.to_owned();
    let changed = *old != incoming;
    *old = incoming;
    changed
}

/// Sets a condition the server decides (Ready, or one it knows better,
/// like Health of a disconnected agent): replaced whatever its status,
/// `lastUpdatedTime` refreshed only when it changes.
pub fn set(stored: &mut Vec<Condition>, mut next: Condition, now: &str) -> bool {
    match stored.iter_mut().find(|c| c.kind == next.kind) {
        Some(old)
            if old.status == next.status
                && old.reason == next.reason
                && old.message == next.message
                && old.observed_generation == next.observed_generation =>
        {
            false
        }
        Some(old) => {
            next.last_transition_time =
                if old.status == next.status { old.last_transition_time.clone() } else { now.to_owned() };
            next.last_updated_time = now.to_owned();
            *old = next;
            true
        }
        None => {
            next.last_transition_time = now.to_owned();
            next.last_updated_time = now.to_owned();
            stored.push(next);
            stored.sort_by_key(|c| c.kind);
            true
        }
    }
}

/// Ready: Available is True and was observed at the current `generation`.
// [feature H3: Ready]
pub fn ready(status: &InstanceStatus, generation: u64) -> Condition {
    use ConditionStatus::{False, True};
    let available = status.condition(ConditionType::Available);
    let (st, reason, message) = match available {
        Some(a) if a.status == True && a.observed_generation == generation => (True, "Available", String::new()),
        Some(a) if a.status == True => (
            False,
            "GenerationPending",
            format!("available at generation {}, the current one is {generation}", a.observed_generation),
        ),
        Some(a) if a.status == ConditionStatus::False => {
            (False, "NotAvailable", if a.message.is_empty() { a.reason.clone() } else { a.message.clone() })
        }
        _ => (False, "AvailabilityUnknown", "no report of its availability yet".to_owned()),
    };
    Condition::new(ConditionType::Ready, st, generation, reason, &message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConditionStatus::{False, True, Unknown};

    fn available(status: ConditionStatus, generation: u64) -> Condition {
        Condition::new(ConditionType::Available, status, generation, "r", "")
    }

    // [test of feature H5]
    #[test]
    fn unknown_does_not_overwrite_a_known_value_nor_refresh_it() {
        let mut stored = Vec::new();
        assert!(merge(&mut stored, available(True, 1), "t1"));
        assert!(!merge(&mut stored, available(Unknown, 2), "t2"));
        assert_eq!(stored[0].status, True);
        assert_eq!(stored[0].observed_generation, 1);
        assert_eq!(stored[0].last_updated_time, "t1");
        // The same status refreshes lastUpdated but keeps lastTransition.
        assert!(merge(&mut stored, available(True, 2), "t3"));
        assert_eq!((stored[0].last_transition_time.as_str(), stored[0].last_updated_time.as_str()), ("t1", "t3"));
        assert!(merge(&mut stored, available(False, 2), "t4"));
        assert_eq!(stored[0].last_transition_time, "t4");
        // A first report of Unknown is stored.
        let mut fresh = Vec::new();
        assert!(merge(&mut fresh, available(Unknown, 1), "t1"));
        assert_eq!(fresh[0].status, Unknown);
    }

    // [test of feature H3]
    #[test]
    fn ready_needs_available_at_the_current_generation() {
        let mut s = InstanceStatus::default();
        assert_eq!(ready(&s, 1).status, False);
        s.conditions.push(available(True, 1));
        assert_eq!(ready(&s, 1).status, True);
        let behind = ready(&s, 2);
        assert_eq!((behind.status, behind.reason.as_str()), (False, "GenerationPending"));
        s.conditions[0].status = False;
        assert_eq!(ready(&s, 1).reason, "NotAvailable");
    }

    #[test]
    fn conditions_follow_the_execution_state() {
        let c = agent_conditions(&ExecutionState::running(), 3, &RuntimeHealth::Reachable);
        let st: Vec<_> = c.iter().map(|c| (c.kind, c.status, c.observed_generation)).collect();
        assert_eq!(
            st,
            [(ConditionType::Applied, True, 3), (ConditionType::Available, True, 3), (ConditionType::Health, True, 3)]
        );
        let failed = agent_conditions(
            &ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), "no image"),
            1,
            &RuntimeHealth::Unreachable("podman: not found".into()),
        );
        assert_eq!(failed[0].status, False);
        assert_eq!(failed[1].reason, "PendingStartingFailed");
        assert_eq!((failed[2].status, failed[2].reason.as_str()), (False, "RuntimeUnreachable"));
        let starting =
            agent_conditions(&ExecutionState::new(StateKind::Pending(Pending::Starting)), 1, &Default::default());
        assert_eq!(starting[1].status, Unknown);
    }

    #[test]
    fn an_instance_without_a_container_is_neither_applied_nor_available() {
        let kinds = [
            StateKind::Pending(Pending::Preempted),
            StateKind::Pending(Pending::QuotaBlocked),
            StateKind::Pending(Pending::Postponed),
            StateKind::Pending(Pending::Canceled),
            StateKind::Removed,
            StateKind::NotScheduled,
        ];
        for kind in kinds {
            let c = agent_conditions(&ExecutionState::new(kind), 2, &RuntimeHealth::Reachable);
            assert_eq!((c[0].status, c[1].status), (False, False), "{kind:?}");
        }
    }

    // [test of feature H4]
    #[test]
    fn a_report_must_carry_all_agent_conditions_or_none() {
        let mut s = InstanceStatus { observed_generation: 1, ..Default::default() };
        assert_eq!(s.missing_agent_condition(), None);
        s.conditions = agent_conditions(&ExecutionState::running(), 1, &RuntimeHealth::Reachable);
        assert_eq!(s.missing_agent_condition(), None);
        s.conditions.retain(|c| c.kind != ConditionType::Health);
        assert_eq!(s.missing_agent_condition(), Some(ConditionType::Health));
    }

    #[test]
    fn status_serializes_camel_case_and_skips_empty_parts() {
        let s = InstanceStatus {
            generation: 2,
            conditions: vec![Condition::new(ConditionType::Ready, True, 2, "Available", "")],
            ..Default::default()
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"generation": 2, "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2, "reason": "Available"}]})
        );
        assert_eq!(serde_json::from_value::<InstanceStatus>(v).unwrap(), s);
    }
}
