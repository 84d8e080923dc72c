//! Execution states `State(SubState)` as Ankaios reports them, with the
//! display form used by the CLI (`Running(Ok)`, `AgentDisconnected`) and the
//! `{state, subState, additionalInfo}` shape of `ank get state`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Top-level state with its sub-state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StateKind {
    AgentDisconnected,
    Pending(Pending),
    Running,
    Stopping(Stopping),
    Succeeded,
    Failed(Failed),
    NotScheduled,
    Removed,
}

/// Sub-states of `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pending {
    Initial,
    WaitingToStart,
    Starting,
    StartingFailed,
    /// The agent's quota (workload count or memory) has no room.
    QuotaBlocked,
    /// Stopped to make room for a higher-priority workload; back in the
    /// queue after the postpone time.
    Preempted,
    /// Waits for an isolated job (or, if isolated, for the other jobs).
    Postponed,
    /// A pipeline step that will not run because an earlier one failed
    /// (terminal).
    Canceled,
}

/// Sub-states of `Stopping`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stopping {
    Stopping,
    WaitingToStop,
    RequestedAtRuntime,
    DeleteFailed,
}

/// Sub-states of `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failed {
    ExecFailed,
    Unknown,
    Lost,
}

/// A workload's execution state plus free-text additional information.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "StateRepr", into = "StateRepr")]
pub struct ExecutionState {
    pub kind: StateKind,
    pub additional_info: String,
}

impl StateKind {
    /// `(state, subState)` names as written in YAML and the CLI.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            StateKind::AgentDisconnected => ("AgentDisconnected", "AgentDisconnected"),
            StateKind::Pending(p) => ("Pending", pending_name(p)),
            StateKind::Running => ("Running", "Ok"),
            StateKind::Stopping(s) => ("Stopping", stopping_name(s)),
            StateKind::Succeeded => ("Succeeded", "Ok"),
            StateKind::Failed(f) => ("Failed", failed_name(f)),
            StateKind::NotScheduled => ("NotScheduled", "NotScheduled"),
            StateKind::Removed => ("Removed", "Removed"),
        }
    }

    /// Parses the `(state, subState)` pair written by [`StateKind::names`].
    pub fn from_names(state: &str, sub: &str) -> Option<Self> {
        let all = [
            StateKind::AgentDisconnected,
            StateKind::Pending(Pending::Initial),
            StateKind::Pending(Pending::WaitingToStart),
            StateKind::Pending(Pending::Starting),
            StateKind::Pending(Pending::StartingFailed),
            StateKind::Pending(Pending::QuotaBlocked),
            StateKind::Pending(Pending::Preempted),
            StateKind::Pending(Pending::Postponed),
            StateKind::Pending(Pending::Canceled),
            StateKind::Running,
            StateKind::Stopping(Stopping::Stopping),
            StateKind::Stopping(Stopping::WaitingToStop),
            StateKind::Stopping(Stopping::RequestedAtRuntime),
            StateKind::Stopping(Stopping::DeleteFailed),
            StateKind::Succeeded,
            StateKind::Failed(Failed::ExecFailed),
            StateKind::Failed(Failed::Unknown),
            StateKind::Failed(Failed::Lost),
            StateKind::NotScheduled,
            StateKind::Removed,
        ];
        all.into_iter().find(|k| {
            let (s, ss) = k.names();
            s == state && (ss == sub || sub.is_empty())
        })
    }

    fn has_substate_display(self) -> bool {
        !matches!(self, StateKind::AgentDisconnected | StateKind::NotScheduled | StateKind::Removed)
    }
}

fn pending_name(p: Pending) -> &'static str {
    match p {
        Pending::Initial => "Initial",
        Pending::WaitingToStart => "WaitingToStart",
        Pending::Starting => "Starting",
        Pending::StartingFailed => "StartingFailed",
        Pending::QuotaBlocked => "QuotaBlocked",
        Pending::Preempted => "Preempted",
        Pending::Postponed => "Postponed",
        Pending::Canceled => "Canceled",
    }
}

fn stopping_name(s: Stopping) -> &'static str {
    match s {
        Stopping::Stopping => "Stopping",
        Stopping::WaitingToStop => "WaitingToStop",
        Stopping::RequestedAtRuntime => "RequestedAtRuntime",
        Stopping::DeleteFailed => "DeleteFailed",
    }
}

fn failed_name(f: Failed) -> &'static str {
    match f {
        Failed::ExecFailed => "ExecFailed",
        Failed::Unknown => "Unknown",
        Failed::Lost => "Lost",
    }
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (state, sub) = self.names();
        if self.has_substate_display() { write!(f, "{state}({sub})") } else { f.write_str(state) }
    }
}

impl ExecutionState {
    /// A state without additional information.
    pub fn new(kind: StateKind) -> Self {
        Self { kind, additional_info: String::new() }
    }

    /// A state with additional information.
    pub fn with_info(kind: StateKind, info: impl Into<String>) -> Self {
        Self { kind, additional_info: info.into() }
    }

    pub fn running() -> Self {
        Self::new(StateKind::Running)
    }
    pub fn succeeded() -> Self {
        Self::new(StateKind::Succeeded)
    }
    pub fn failed(info: impl Into<String>) -> Self {
        Self::with_info(StateKind::Failed(Failed::ExecFailed), info)
    }
    pub fn removed() -> Self {
        Self::new(StateKind::Removed)
    }
    pub fn agent_disconnected() -> Self {
        Self::new(StateKind::AgentDisconnected)
    }
    pub fn not_scheduled() -> Self {
        Self::new(StateKind::NotScheduled)
    }
    pub fn pending_initial() -> Self {
        Self::new(StateKind::Pending(Pending::Initial))
    }

    /// Whether the workload has come to rest: a CLI waiting for an apply
    /// stops waiting once every workload is in such a state.
    pub fn is_final(&self) -> bool {
        matches!(
            self.kind,
            StateKind::Running
                | StateKind::Succeeded
                | StateKind::Failed(_)
                | StateKind::NotScheduled
                | StateKind::Removed
                | StateKind::Pending(Pending::StartingFailed)
                | StateKind::Pending(Pending::Canceled)
                | StateKind::Stopping(Stopping::DeleteFailed)
        )
    }
}

impl fmt::Display for ExecutionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.additional_info.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: '{}'", self.kind, self.additional_info)
        }
    }
}

/// Serialized shape: `{state, subState, additionalInfo}`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateRepr {
    state: String,
    #[serde(default)]
    sub_state: String,
    #[serde(default)]
    additional_info: String,
}

impl From<ExecutionState> for StateRepr {
    fn from(s: ExecutionState) -> Self {
        let (state, sub) = s.kind.names();
        StateRepr { state: state.to_owned(), sub_state: sub.to_owned(), additional_info: s.additional_info }
    }
}

/// A state and sub-state pair no execution state has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown execution state '{state}({sub_state})'")]
pub struct UnknownExecutionState {
    pub state: String,
    pub sub_state: String,
}

impl TryFrom<StateRepr> for ExecutionState {
    type Error = UnknownExecutionState;
    fn try_from(r: StateRepr) -> Result<Self, UnknownExecutionState> {
        let kind = StateKind::from_names(&r.state, &r.sub_state)
            .ok_or_else(|| UnknownExecutionState { state: r.state.clone(), sub_state: r.sub_state.clone() })?;
        Ok(ExecutionState { kind, additional_info: r.additional_info })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execution_state_display_forms() {
        assert_eq!(ExecutionState::running().to_string(), "Running(Ok)");
        assert_eq!(ExecutionState::failed("").to_string(), "Failed(ExecFailed)");
        assert_eq!(ExecutionState::agent_disconnected().to_string(), "AgentDisconnected");
        assert_eq!(ExecutionState::not_scheduled().to_string(), "NotScheduled");
        assert_eq!(
            ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), "no runtime").to_string(),
            "Pending(StartingFailed): 'no runtime'"
        );
    }

    #[test]
    fn execution_state_names_round_trip() {
        for kind in [
            StateKind::Pending(Pending::WaitingToStart),
            StateKind::Stopping(Stopping::DeleteFailed),
            StateKind::Failed(Failed::Lost),
            StateKind::Removed,
        ] {
            let (s, ss) = kind.names();
            assert_eq!(StateKind::from_names(s, ss), Some(kind));
        }
        assert_eq!(StateKind::from_names("Bogus", "Ok"), None);
    }
}
