//! Wire <-> domain for instance names, execution states and workload states.

use ank_proto::ank_base as pb;
use pb::execution_state::ExecutionStateEnum as E;

use super::ConvertError;
use crate::conditions::{Condition, ConditionStatus, ConditionType, InstanceStatus, RevertMark};
use crate::execution_state::{ExecutionState, Failed, Pending, StateKind, Stopping};
use crate::instance_name::WorkloadInstanceName;
use crate::names::{AgentName, WorkloadName};
use crate::workload::WorkloadState;
use crate::workload_events::{EventKind, WorkloadEvent};

pub fn instance_name_to_proto(n: &WorkloadInstanceName) -> pb::WorkloadInstanceName {
    pb::WorkloadInstanceName {
        workload_name: n.workload_name.clone(),
        agent_name: n.agent_name.clone(),
        id: n.id.clone(),
    }
}

pub fn instance_name_from_proto(n: Option<pb::WorkloadInstanceName>) -> Result<WorkloadInstanceName, ConvertError> {
    let n = n.ok_or_else(|| ConvertError::missing("instanceName"))?;
    WorkloadName::new(n.workload_name.as_str()).map_err(|e| ConvertError(e.to_string()))?;
    AgentName::new(n.agent_name.as_str()).map_err(|e| ConvertError(e.to_string()))?;
    crate::instance_name::check_id(&n.id).map_err(|e| ConvertError(e.to_string()))?;
    Ok(WorkloadInstanceName { workload_name: n.workload_name, agent_name: n.agent_name, id: n.id })
}

pub fn execution_state_to_proto(s: &ExecutionState) -> pb::ExecutionState {
    let e = match s.kind {
        StateKind::AgentDisconnected => E::AgentDisconnected(pb::AgentDisconnected::AgentDisconnected as i32),
        StateKind::Pending(p) => E::Pending(match p {
            Pending::Initial => pb::Pending::Initial,
            Pending::WaitingToStart => pb::Pending::WaitingToStart,
            Pending::Starting => pb::Pending::Starting,
            Pending::StartingFailed => pb::Pending::StartingFailed,
            Pending::QuotaBlocked => pb::Pending::QuotaBlocked,
            Pending::Preempted => pb::Pending::Preempted,
            Pending::Postponed => pb::Pending::Postponed,
            Pending::Canceled => pb::Pending::Canceled,
        } as i32),
        StateKind::Running => E::Running(pb::Running::Ok as i32),
        StateKind::Stopping(st) => E::Stopping(match st {
            Stopping::Stopping => pb::Stopping::Stopping,
            Stopping::WaitingToStop => pb::Stopping::WaitingToStop,
            Stopping::RequestedAtRuntime => pb::Stopping::RequestedAtRuntime,
            Stopping::DeleteFailed => pb::Stopping::DeleteFailed,
        } as i32),
        StateKind::Succeeded => E::Succeeded(pb::Succeeded::Ok as i32),
        StateKind::Failed(f) => E::Failed(match f {
            Failed::ExecFailed => pb::Failed::ExecFailed,
            Failed::Unknown => pb::Failed::Unknown,
            Failed::Lost => pb::Failed::Lost,
        } as i32),
        StateKind::NotScheduled => E::NotScheduled(pb::NotScheduled::NotScheduled as i32),
        StateKind::Removed => E::Removed(pb::Removed::Removed as i32),
    };
    pb::ExecutionState {
        additional_info: Some(s.additional_info.clone()),
        execution_state_enum: Some(e),
        ..Default::default()
    }
}

/// An execution state with this orchestrator's generation and conditions.
pub fn status_to_proto(s: &ExecutionState, status: &InstanceStatus) -> pb::ExecutionState {
    let nonzero = |n: u64| (n != 0).then_some(n);
    pb::ExecutionState {
        observed_generation: nonzero(status.observed_generation),
        conditions: status.conditions.iter().map(condition_to_proto).collect(),
        generation: nonzero(status.generation),
        resyncs: nonzero(status.resyncs),
        events: status.events.iter().map(event_to_proto).collect(),
        reverted: status.reverted.as_ref().map(|r| pb::RevertMark {
            from_generation: r.from_generation,
            to_generation: r.to_generation,
            reason: r.reason.clone(),
            at: r.at.clone(),
        }),
        ..execution_state_to_proto(s)
    }
}

/// The execution state and the extensions of a wire execution state.
pub fn status_from_proto(s: Option<pb::ExecutionState>) -> Result<(ExecutionState, InstanceStatus), ConvertError> {
    let s = s.ok_or_else(|| ConvertError::missing("executionState"))?;
    let status = InstanceStatus {
        generation: s.generation.unwrap_or(0),
        observed_generation: s.observed_generation.unwrap_or(0),
        conditions: s.conditions.iter().map(condition_from_proto).collect::<Result<_, _>>()?,
        resyncs: s.resyncs.unwrap_or(0),
        // Kinds this build does not know (a newer peer's) are left out.
        events: s.events.iter().filter_map(event_from_proto).collect(),
        reverted: s.reverted.as_ref().map(|r| RevertMark {
            from_generation: r.from_generation,
            to_generation: r.to_generation,
            reason: r.reason.clone(),
            at: r.at.clone(),
        }),
    };
    Ok((execution_state_from_proto(Some(s))?, status))
}

fn event_to_proto(e: &WorkloadEvent) -> pb::WorkloadEvent {
    pb::WorkloadEvent {
        kind: e.kind.as_str().to_owned(),
        reason: e.reason.clone(),
        count: e.count,
        first_seen: e.first_seen.clone(),
        last: e.last.clone(),
    }
}

fn event_from_proto(e: &pb::WorkloadEvent) -> Option<WorkloadEvent> {
    Some(WorkloadEvent {
        kind: EventKind::parse(&e.kind)?,
        reason: e.reason.clone(),
        count: e.count,
        first_seen: e.first_seen.clone(),
        last: e.last.clone(),
    })
}

fn condition_to_proto(c: &Condition) -> pb::Condition {
    let status = match c.status {
        ConditionStatus::Unknown => pb::ConditionStatus::ConditionUnknown,
        ConditionStatus::True => pb::ConditionStatus::ConditionTrue,
        ConditionStatus::False => pb::ConditionStatus::ConditionFalse,
    };
    pb::Condition {
        r#type: c.kind.as_str().to_owned(),
        status: status as i32,
        observed_generation: c.observed_generation,
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: c.last_transition_time.clone(),
        last_updated_time: c.last_updated_time.clone(),
    }
}

fn condition_from_proto(c: &pb::Condition) -> Result<Condition, ConvertError> {
    let kind = ConditionType::parse(&c.r#type)
        .ok_or_else(|| ConvertError(format!("unknown condition type '{}'", c.r#type)))?;
    let status = match pb::ConditionStatus::try_from(c.status) {
        Ok(pb::ConditionStatus::ConditionTrue) => ConditionStatus::True,
        Ok(pb::ConditionStatus::ConditionFalse) => ConditionStatus::False,
        Ok(pb::ConditionStatus::ConditionUnknown) => ConditionStatus::Unknown,
        Err(_) => return Err(ConvertError(format!("condition {}: unknown status {}", c.r#type, c.status))),
    };
    Ok(Condition {
        kind,
        status,
        observed_generation: c.observed_generation,
        reason: c.reason.clone(),
        message: c.message.clone(),
        last_transition_time: c.last_transition_time.clone(),
        last_updated_time: c.last_updated_time.clone(),
    })
}

fn sub<T: TryFrom<i32>>(v: i32, what: &str) -> Result<T, ConvertError> {
    T::try_from(v).map_err(|_| ConvertError(format!("unknown {what} sub-state {v}")))
}

pub fn execution_state_from_proto(s: Option<pb::ExecutionState>) -> Result<ExecutionState, ConvertError> {
    let s = s.ok_or_else(|| ConvertError::missing("executionState"))?;
    let e = s.execution_state_enum.ok_or_else(|| ConvertError::missing("executionState.state"))?;
    let kind = match e {
        E::AgentDisconnected(_) => StateKind::AgentDisconnected,
        E::Pending(v) => StateKind::Pending(match sub::<pb::Pending>(v, "Pending")? {
            pb::Pending::Initial => Pending::Initial,
            pb::Pending::WaitingToStart => Pending::WaitingToStart,
            pb::Pending::Starting => Pending::Starting,
            pb::Pending::StartingFailed => Pending::StartingFailed,
            pb::Pending::QuotaBlocked => Pending::QuotaBlocked,
            pb::Pending::Preempted => Pending::Preempted,
            pb::Pending::Postponed => Pending::Postponed,
            pb::Pending::Canceled => Pending::Canceled,
        }),
        E::Running(_) => StateKind::Running,
        E::Stopping(v) => StateKind::Stopping(match sub::<pb::Stopping>(v, "Stopping")? {
            pb::Stopping::Stopping => Stopping::Stopping,
            pb::Stopping::WaitingToStop => Stopping::WaitingToStop,
            pb::Stopping::RequestedAtRuntime => Stopping::RequestedAtRuntime,
            pb::Stopping::DeleteFailed => Stopping::DeleteFailed,
        }),
        E::Succeeded(_) => StateKind::Succeeded,
        E::Failed(v) => StateKind::Failed(match sub::<pb::Failed>(v, "Failed")? {
            pb::Failed::ExecFailed => Failed::ExecFailed,
            pb::Failed::Unknown => Failed::Unknown,
            pb::Failed::Lost => Failed::Lost,
        }),
        E::NotScheduled(_) => StateKind::NotScheduled,
        E::Removed(_) => StateKind::Removed,
    };
    Ok(ExecutionState { kind, additional_info: s.additional_info.unwrap_or_default() })
}

pub fn workload_state_to_proto(s: &WorkloadState) -> pb::WorkloadState {
    pb::WorkloadState {
        instance_name: Some(instance_name_to_proto(&s.instance_name)),
        execution_state: Some(status_to_proto(&s.execution_state, &s.status)),
    }
}

pub fn workload_state_from_proto(s: pb::WorkloadState) -> Result<WorkloadState, ConvertError> {
    let (execution_state, status) = status_from_proto(s.execution_state)?;
    Ok(WorkloadState { instance_name: instance_name_from_proto(s.instance_name)?, execution_state, status })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_mapping_round_trips_every_state() {
        for kind in [
            StateKind::AgentDisconnected,
            StateKind::Pending(Pending::StartingFailed),
            StateKind::Running,
            StateKind::Stopping(Stopping::RequestedAtRuntime),
            StateKind::Succeeded,
            StateKind::Failed(Failed::Lost),
            StateKind::NotScheduled,
            StateKind::Removed,
        ] {
            let s = ExecutionState::with_info(kind, "i");
            assert_eq!(execution_state_from_proto(Some(execution_state_to_proto(&s))).unwrap(), s);
        }
    }

    #[test]
    fn state_mapping_uses_wire_enum_numbers() {
        let p = execution_state_to_proto(&ExecutionState::new(StateKind::Pending(Pending::StartingFailed)));
        assert_eq!(p.execution_state_enum, Some(E::Pending(8)));
        let bad = pb::ExecutionState { execution_state_enum: Some(E::Failed(77)), ..Default::default() };
        assert!(execution_state_from_proto(Some(bad)).is_err());
        assert!(execution_state_from_proto(None).is_err());
    }

    #[test]
    fn generations_and_conditions_travel_beside_the_state() {
        use crate::conditions::{RuntimeHealth, agent_conditions};
        let status = InstanceStatus {
            generation: 3,
            observed_generation: 2,
            conditions: agent_conditions(&ExecutionState::running(), 2, &RuntimeHealth::Reachable),
            resyncs: 1,
            events: vec![WorkloadEvent {
                kind: EventKind::QuotaBlocked,
                reason: "agent_A 2/2".into(),
                count: 5,
                first_seen: "2026-11-23T10:00:00.000Z".into(),
                last: "2026-11-23T10:00:04.000Z".into(),
            }],
            reverted: Some(crate::conditions::RevertMark {
                from_generation: 3,
                to_generation: 1,
                reason: "generation 3 not Ready within 1m; put back generation 1".into(),
                at: "2026-11-23T10:01:00.000Z".into(),
            }),
        };
        let s = WorkloadState::new(
            WorkloadInstanceName { workload_name: "w".into(), agent_name: "A".into(), id: "1".into() },
            ExecutionState::running(),
        )
        .with_status(status);
        let pb = workload_state_to_proto(&s);
        assert_eq!(pb.execution_state.as_ref().unwrap().observed_generation, Some(2));
        assert_eq!(workload_state_from_proto(pb).unwrap(), s);
        // An Ankaios report has none of them.
        let plain = execution_state_to_proto(&ExecutionState::running());
        assert_eq!(status_from_proto(Some(plain)).unwrap().1, InstanceStatus::default());
    }
}
