//! Wire <-> domain for the gRPC envelopes `ToServer` / `FromServer` and the
//! requests and responses they carry.

use std::collections::BTreeMap;

use ank_proto::ank_base as pb;
use ank_proto::grpc_api as g;

use super::{
    AlteredFields, DeleteCondition, DeletedWorkload, FromServer, HookChange, LogEntry, LogsRequest, Request,
    RequestContent, Response, ResponseContent, ToServer,
};
use crate::complete_state::AgentStatus;
use crate::convert::{
    ConvertError, PartialCompleteState, PartialWorkload, complete_state_from_json, instance_name_from_proto,
    instance_name_to_proto, workload_from_pb, workload_state_from_proto, workload_state_to_proto, workload_to_pb,
};
use crate::quota::{QuotaLimits, QuotaUsage};
use crate::workload::{Workload, WorkloadSpec};

fn added_to_pb(s: &WorkloadSpec) -> g::AddedWorkload {
    let partial = PartialWorkload::from(&s.workload);
    g::AddedWorkload {
        instance_name: Some(instance_name_to_proto(&s.instance_name)),
        workload: Some(workload_to_pb(partial)),
        generation: s.generation,
    }
}

fn added_from_pb(a: g::AddedWorkload) -> Result<WorkloadSpec, ConvertError> {
    let instance_name = instance_name_from_proto(a.instance_name)?;
    let generation = a.generation;
    let wire = a.workload.ok_or_else(|| ConvertError::missing("workload"))?;
    // The rendered runtimeConfig the server hashed into the instance name is
    // run as sent: only what users write is trimmed, not a rendered spec.
    let rendered = wire.runtime_config.clone();
    let partial = workload_from_pb(wire)?;
    let value = serde_json::to_value(partial).map_err(|e| ConvertError(e.to_string()))?;
    let mut workload: Workload = serde_json::from_value(value)
        .map_err(|e| ConvertError(format!("workload '{}': {e}", instance_name.workload_name)))?;
    if let Some(rendered) = rendered {
        workload.runtime_config = rendered;
    }
    Ok(WorkloadSpec { instance_name, workload, generation })
}

/// The `UpdateWorkload` message a mutating hook reads: `added` and
/// `deleted` as agents would get them, without the generation (the server's
/// business, not the hook's).
pub fn update_workload_to_proto(added: &[WorkloadSpec], deleted: &[DeletedWorkload]) -> g::UpdateWorkload {
    g::UpdateWorkload {
        added_workloads: added.iter().map(|s| g::AddedWorkload { generation: 0, ..added_to_pb(s) }).collect(),
        deleted_workloads: deleted.iter().map(deleted_to_pb).collect(),
        resync: false,
    }
}

/// What a mutating hook answered: the added workloads by name and the names
/// of the deleted ones.
pub type HookAnswer = (Vec<(crate::WorkloadName, Workload)>, Vec<String>);

/// Reads [`HookAnswer`] from a hook's `UpdateWorkload`. Only the workload name of an instance name is read
/// (the server computes agent and id from the workload), so an unscheduled
/// workload (empty agent) reads too.
pub fn hook_answer_from_proto(u: g::UpdateWorkload) -> Result<HookAnswer, ConvertError> {
    let mut added = Vec::with_capacity(u.added_workloads.len());
    for a in u.added_workloads {
        let name = a.instance_name.ok_or_else(|| ConvertError::missing("instanceName"))?.workload_name;
        let name = crate::WorkloadName::new(name.as_str()).map_err(|e| ConvertError(e.to_string()))?;
        let wire = a.workload.ok_or_else(|| ConvertError::missing("workload"))?;
        let rendered = wire.runtime_config.clone();
        let value = serde_json::to_value(workload_from_pb(wire)?).map_err(|e| ConvertError(e.to_string()))?;
        let mut workload: Workload =
            serde_json::from_value(value).map_err(|e| ConvertError(format!("workload '{name}': {e}")))?;
        if let Some(rendered) = rendered {
            workload.runtime_config = rendered;
        }
        added.push((name, workload));
    }
    let deleted = u.deleted_workloads.into_iter().filter_map(|d| d.instance_name.map(|n| n.workload_name)).collect();
    Ok((added, deleted))
}

fn deleted_to_pb(d: &DeletedWorkload) -> g::DeletedWorkload {
    g::DeletedWorkload {
        instance_name: Some(instance_name_to_proto(&d.instance_name)),
        dependencies: d
            .dependencies
            .iter()
            .map(|(k, c)| {
                let v = match c {
                    DeleteCondition::Running => g::DeleteCondition::DelCondRunning,
                    DeleteCondition::NotPendingNorRunning => g::DeleteCondition::DelCondNotPendingNorRunning,
                };
                (k.clone(), v as i32)
            })
            .collect(),
    }
}

fn deleted_from_pb(d: g::DeletedWorkload) -> Result<DeletedWorkload, ConvertError> {
    let mut dependencies = BTreeMap::new();
    for (k, v) in d.dependencies {
        let c = match g::DeleteCondition::try_from(v) {
            Ok(g::DeleteCondition::DelCondRunning) => DeleteCondition::Running,
            Ok(g::DeleteCondition::DelCondNotPendingNorRunning) => DeleteCondition::NotPendingNorRunning,
            Err(_) => return Err(ConvertError(format!("unknown delete condition {v} for '{k}'"))),
        };
        dependencies.insert(k, c);
    }
    Ok(DeletedWorkload { instance_name: instance_name_from_proto(d.instance_name)?, dependencies })
}

/// Domain -> wire for messages from the server.
pub fn from_server_to_proto(m: &FromServer) -> g::FromServer {
    use g::from_server::FromServerEnum as F;
    let e = match m {
        FromServer::ServerHello(added) => {
            F::ServerHello(g::ServerHello { added_workloads: added.iter().map(added_to_pb).collect() })
        }
        FromServer::UpdateWorkload { added, deleted, resync } => F::UpdateWorkload(g::UpdateWorkload {
            added_workloads: added.iter().map(added_to_pb).collect(),
            deleted_workloads: deleted.iter().map(deleted_to_pb).collect(),
            resync: *resync,
        }),
        FromServer::UpdateWorkloadState(states) => F::UpdateWorkloadState(g::UpdateWorkloadState {
            workload_states: states.iter().map(workload_state_to_proto).collect(),
        }),
        FromServer::Response(r) => F::Response(response_to_pb(r)),
        FromServer::LogsRequest { request_id, request } => F::LogsRequest(g::LogsRequest {
            request_id: request_id.clone(),
            logs_request: Some(logs_request_to_pb(request)),
        }),
        FromServer::LogsCancelRequest { request_id } => {
            F::LogsCancelRequest(g::LogsCancelRequest { request_id: request_id.clone() })
        }
    };
    g::FromServer { from_server_enum: Some(e) }
}

/// Wire -> domain for messages from the server; `Ok(None)` for message kinds
/// this version ignores.
pub fn from_server_from_proto(m: g::FromServer) -> Result<Option<FromServer>, ConvertError> {
    use g::from_server::FromServerEnum as F;
    Ok(Some(match m.from_server_enum.ok_or_else(|| ConvertError::missing("FromServer"))? {
        F::ServerHello(h) => {
            FromServer::ServerHello(h.added_workloads.into_iter().map(added_from_pb).collect::<Result<_, _>>()?)
        }
        F::UpdateWorkload(u) => FromServer::UpdateWorkload {
            added: u.added_workloads.into_iter().map(added_from_pb).collect::<Result<_, _>>()?,
            deleted: u.deleted_workloads.into_iter().map(deleted_from_pb).collect::<Result<_, _>>()?,
            resync: u.resync,
        },
        F::UpdateWorkloadState(s) => FromServer::UpdateWorkloadState(
            s.workload_states.into_iter().map(workload_state_from_proto).collect::<Result<_, _>>()?,
        ),
        F::Response(r) => FromServer::Response(response_from_pb(r)?),
        F::LogsRequest(r) => FromServer::LogsRequest {
            request_id: r.request_id,
            request: logs_request_from_pb(r.logs_request.ok_or_else(|| ConvertError::missing("LogsRequest"))?)?,
        },
        F::LogsCancelRequest(r) => FromServer::LogsCancelRequest { request_id: r.request_id },
    }))
}

/// Domain -> wire for messages to the server.
pub fn to_server_to_proto(m: &ToServer) -> g::ToServer {
    use g::to_server::ToServerEnum as T;
    let e = match m {
        ToServer::AgentHello { agent_name, protocol_version, tags, reports_conditions, capabilities, quota } => {
            T::AgentHello(g::AgentHello {
                agent_name: agent_name.clone(),
                protocol_version: protocol_version.clone(),
                tags: Some(pb::Tags { tags: tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect() }),
                reports_conditions: *reports_conditions,
                capabilities: capabilities.clone(),
                max_workloads: quota.max_workloads,
                max_memory: quota.max_memory,
            })
        }
        ToServer::CommanderHello { protocol_version } => {
            T::CommanderHello(g::CommanderHello { protocol_version: protocol_version.clone() })
        }
        ToServer::UpdateWorkloadState(states) => T::UpdateWorkloadState(g::UpdateWorkloadState {
            workload_states: states.iter().map(workload_state_to_proto).collect(),
        }),
        ToServer::AgentLoadStatus { agent_name, status, metrics, quota_used } => {
            T::AgentLoadStatus(g::AgentLoadStatus {
                agent_name: agent_name.clone(),
                cpu_usage: Some(pb::CpuUsage { cpu_usage: status.cpu_usage }),
                free_memory: Some(pb::FreeMemory { free_memory: status.free_memory }),
                metrics: metrics.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                used_workloads: quota_used.workloads,
                used_memory: quota_used.memory,
            })
        }
        ToServer::Request(r) => T::Request(request_to_pb(r)),
        ToServer::Goodbye => T::Goodbye(g::Goodbye {}),
        ToServer::LogEntriesResponse { request_id, entries } => T::LogEntriesResponse(g::LogEntriesResponse {
            request_id: request_id.clone(),
            log_entries_response: Some(log_entries_to_pb(entries)),
        }),
        ToServer::LogsStopResponse { request_id, workload_name, reason } => T::LogsStopResponse(g::LogsStopResponse {
            request_id: request_id.clone(),
            logs_stop_response: Some(pb::LogsStopResponse {
                workload_name: Some(instance_name_to_proto(workload_name)),
                reason: reason.clone(),
            }),
        }),
    };
    g::ToServer { to_server_enum: Some(e) }
}

/// Wire -> domain for messages to the server; `Ok(None)` for message kinds
/// this version ignores.
pub fn to_server_from_proto(m: g::ToServer) -> Result<Option<ToServer>, ConvertError> {
    use g::to_server::ToServerEnum as T;
    Ok(Some(match m.to_server_enum.ok_or_else(|| ConvertError::missing("ToServer"))? {
        T::AgentHello(h) => ToServer::AgentHello {
            agent_name: h.agent_name,
            protocol_version: h.protocol_version,
            tags: h.tags.map(|t| t.tags.into_iter().collect()).unwrap_or_default(),
            reports_conditions: h.reports_conditions,
            capabilities: h.capabilities,
            quota: QuotaLimits { max_workloads: h.max_workloads, max_memory: h.max_memory },
        },
        T::CommanderHello(h) => ToServer::CommanderHello { protocol_version: h.protocol_version },
        T::UpdateWorkloadState(s) => ToServer::UpdateWorkloadState(
            s.workload_states.into_iter().map(workload_state_from_proto).collect::<Result<_, _>>()?,
        ),
        T::AgentLoadStatus(s) => ToServer::AgentLoadStatus {
            agent_name: s.agent_name,
            status: AgentStatus {
                cpu_usage: s.cpu_usage.map_or(0, |c| c.cpu_usage),
                free_memory: s.free_memory.map_or(0, |m| m.free_memory),
            },
            metrics: s.metrics.into_iter().filter(|(_, v)| v.is_finite()).collect(),
            quota_used: QuotaUsage { workloads: s.used_workloads, memory: s.used_memory },
        },
        T::Request(r) => ToServer::Request(request_from_pb(r)?),
        T::Goodbye(_) => ToServer::Goodbye,
        T::LogEntriesResponse(r) => ToServer::LogEntriesResponse {
            request_id: r.request_id,
            entries: log_entries_from_pb(r.log_entries_response.unwrap_or_default())?,
        },
        T::LogsStopResponse(r) => {
            let stop = r.logs_stop_response.unwrap_or_default();
            ToServer::LogsStopResponse {
                request_id: r.request_id,
                workload_name: instance_name_from_proto(stop.workload_name)?,
                reason: stop.reason,
            }
        }
    }))
}

fn log_entries_to_pb(entries: &[LogEntry]) -> pb::LogEntriesResponse {
    pb::LogEntriesResponse {
        log_entries: entries
            .iter()
            .map(|e| pb::LogEntry {
                workload_name: Some(instance_name_to_proto(&e.workload_name)),
                message: e.message.clone(),
            })
            .collect(),
    }
}

fn log_entries_from_pb(l: pb::LogEntriesResponse) -> Result<Vec<LogEntry>, ConvertError> {
    l.log_entries
        .into_iter()
        .map(|e| Ok(LogEntry { workload_name: instance_name_from_proto(e.workload_name)?, message: e.message }))
        .collect()
}

/// Domain -> wire log request.
pub fn logs_request_to_pb(r: &LogsRequest) -> pb::LogsRequest {
    pb::LogsRequest {
        workload_names: r.workload_names.iter().map(instance_name_to_proto).collect(),
        follow: Some(r.follow),
        tail: Some(r.tail),
        since: r.since.clone(),
        until: r.until.clone(),
    }
}

/// Wire -> domain log request (absent options: no follow, all lines).
pub fn logs_request_from_pb(r: pb::LogsRequest) -> Result<LogsRequest, ConvertError> {
    Ok(LogsRequest {
        workload_names: r
            .workload_names
            .into_iter()
            .map(|n| instance_name_from_proto(Some(n)))
            .collect::<Result<_, _>>()?,
        follow: r.follow.unwrap_or(false),
        tail: r.tail.unwrap_or(-1),
        since: r.since.filter(|s| !s.is_empty()),
        until: r.until.filter(|s| !s.is_empty()),
    })
}

/// Domain -> wire request.
pub fn request_to_pb(r: &Request) -> pb::Request {
    use pb::request::RequestContent as C;
    let content = match &r.content {
        RequestContent::CompleteState { field_mask, subscribe_for_events } => {
            Some(C::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: field_mask.clone(),
                subscribe_for_events: *subscribe_for_events,
            }))
        }
        RequestContent::UpdateState { new_state, update_mask } => Some(C::UpdateStateRequest(pb::UpdateStateRequest {
            new_state: Some(new_state.as_ref().clone().into_proto()),
            update_mask: update_mask.clone(),
        })),
        RequestContent::Logs(l) => Some(C::LogsRequest(logs_request_to_pb(l))),
        RequestContent::LogsCancel => Some(C::LogsCancelRequest(pb::LogsCancelRequest {})),
        RequestContent::EventsCancel => Some(C::EventsCancelRequest(pb::EventsCancelRequest {})),
        RequestContent::JobRerun { failed_only } => {
            Some(C::JobRerunRequest(pb::JobRerunRequest { failed_only: *failed_only }))
        }
        RequestContent::JobInterrupt { job_id } => {
            Some(C::JobInterruptRequest(pb::JobInterruptRequest { job_id: *job_id }))
        }
        RequestContent::RenderedState { field_mask } => {
            Some(C::RenderedStateRequest(pb::RenderedStateRequest { field_mask: field_mask.clone() }))
        }
    };
    pb::Request { request_id: r.request_id.clone(), request_content: content }
}

/// Wire -> domain request.
pub fn request_from_pb(r: pb::Request) -> Result<Request, ConvertError> {
    use pb::request::RequestContent as C;
    let content = match r.request_content.ok_or_else(|| ConvertError::missing("requestContent"))? {
        C::CompleteStateRequest(c) => {
            RequestContent::CompleteState { field_mask: c.field_mask, subscribe_for_events: c.subscribe_for_events }
        }
        C::UpdateStateRequest(u) => RequestContent::UpdateState {
            new_state: Box::new(PartialCompleteState::from_proto(u.new_state.unwrap_or_default())?),
            update_mask: u.update_mask,
        },
        C::LogsRequest(l) => RequestContent::Logs(logs_request_from_pb(l)?),
        C::LogsCancelRequest(_) => RequestContent::LogsCancel,
        C::EventsCancelRequest(_) => RequestContent::EventsCancel,
        C::JobRerunRequest(r) => RequestContent::JobRerun { failed_only: r.failed_only },
        C::JobInterruptRequest(r) => RequestContent::JobInterrupt { job_id: r.job_id },
        C::RenderedStateRequest(r) => RequestContent::RenderedState { field_mask: r.field_mask },
    };
    Ok(Request { request_id: r.request_id, content })
}

/// Domain -> wire response.
pub fn response_to_pb(r: &Response) -> pb::Response {
    use pb::response::ResponseContent as C;
    let content = match &r.content {
        ResponseContent::Error(message) => C::Error(pb::Error { message: message.clone() }),
        ResponseContent::CompleteState(cs) => C::CompleteStateResponse(pb::CompleteStateResponse {
            complete_state: Some((**cs).clone().into_proto()),
            altered_fields: None,
        }),
        ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, job_id, hook_changes } => {
            C::UpdateStateSuccess(pb::UpdateStateSuccess {
                added_workloads: added_workloads.clone(),
                deleted_workloads: deleted_workloads.clone(),
                job_id: *job_id,
                hook_changes: hook_changes
                    .iter()
                    .map(|c| pb::HookChange { hook: c.hook.clone(), workloads: c.workloads.clone() })
                    .collect(),
            })
        }
        ResponseContent::LogsRequestAccepted(names) => C::LogsRequestAccepted(pb::LogsRequestAccepted {
            workload_names: names.iter().map(instance_name_to_proto).collect(),
        }),
        ResponseContent::LogEntries(entries) => C::LogEntriesResponse(log_entries_to_pb(entries)),
        ResponseContent::LogsStop { workload_name, reason } => C::LogsStopResponse(pb::LogsStopResponse {
            workload_name: Some(instance_name_to_proto(workload_name)),
            reason: reason.clone(),
        }),
        ResponseContent::LogsCancelAccepted => C::LogsCancelAccepted(pb::LogsCancelAccepted {}),
        ResponseContent::Event { complete_state, altered_fields } => match complete_state_from_json(complete_state) {
            Ok(cs) => C::CompleteStateResponse(pb::CompleteStateResponse {
                complete_state: Some(cs),
                altered_fields: Some(pb::AlteredFields {
                    added_fields: altered_fields.added_fields.clone(),
                    updated_fields: altered_fields.updated_fields.clone(),
                    removed_fields: altered_fields.removed_fields.clone(),
                }),
            }),
            Err(e) => C::Error(pb::Error { message: e.to_string() }),
        },
        ResponseContent::EventsCancelAccepted => C::EventsCancelAccepted(pb::EventsCancelAccepted {}),
    };
    pb::Response { request_id: r.request_id.clone(), response_content: Some(content) }
}

/// Wire -> domain response.
pub fn response_from_pb(r: pb::Response) -> Result<Response, ConvertError> {
    use pb::response::ResponseContent as C;
    let content = match r.response_content.ok_or_else(|| ConvertError::missing("responseContent"))? {
        C::Error(e) => ResponseContent::Error(e.message),
        C::CompleteStateResponse(c) => {
            let state = PartialCompleteState::from_proto(c.complete_state.unwrap_or_default())?;
            match c.altered_fields {
                None => ResponseContent::CompleteState(Box::new(state)),
                Some(a) => ResponseContent::Event {
                    complete_state: Box::new(state.to_json()?),
                    altered_fields: AlteredFields {
                        added_fields: a.added_fields,
                        updated_fields: a.updated_fields,
                        removed_fields: a.removed_fields,
                    },
                },
            }
        }
        C::UpdateStateSuccess(s) => ResponseContent::UpdateStateSuccess {
            added_workloads: s.added_workloads,
            deleted_workloads: s.deleted_workloads,
            job_id: s.job_id,
            hook_changes: s
                .hook_changes
                .into_iter()
                .map(|c| HookChange { hook: c.hook, workloads: c.workloads })
                .collect(),
        },
        C::LogsRequestAccepted(a) => ResponseContent::LogsRequestAccepted(
            a.workload_names.into_iter().map(|n| instance_name_from_proto(Some(n))).collect::<Result<_, _>>()?,
        ),
        C::LogEntriesResponse(l) => ResponseContent::LogEntries(log_entries_from_pb(l)?),
        C::LogsStopResponse(s) => {
            ResponseContent::LogsStop { workload_name: instance_name_from_proto(s.workload_name)?, reason: s.reason }
        }
        C::LogsCancelAccepted(_) => ResponseContent::LogsCancelAccepted,
        C::EventsCancelAccepted(_) => ResponseContent::EventsCancelAccepted,
    };
    Ok(Response { request_id: r.request_id, content })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{AgentName, WorkloadName};

    #[test]
    fn server_hello_round_trips_through_the_wire() {
        let wl = Workload {
            agent: "agent_A".into(),
            runtime: "podman".into(),
            runtime_config: "image: busybox".into(),
            ..Default::default()
        };
        let spec = WorkloadSpec::new(&WorkloadName::new("w").unwrap(), &AgentName::new("agent_A").unwrap(), wl);
        let m = FromServer::ServerHello(vec![spec]);
        assert_eq!(from_server_from_proto(from_server_to_proto(&m)).unwrap(), Some(m));
    }

    #[test]
    fn the_resync_mark_round_trips_and_an_ankaios_update_workload_is_no_resync() {
        use prost::Message;
        let m = FromServer::UpdateWorkload { added: Vec::new(), deleted: Vec::new(), resync: true };
        assert_eq!(from_server_from_proto(from_server_to_proto(&m)).unwrap(), Some(m));
        // An Eclipse Ankaios server sends UpdateWorkload without field 100.
        let plain = g::UpdateWorkload { added_workloads: Vec::new(), deleted_workloads: Vec::new(), resync: false };
        let bytes = g::FromServer { from_server_enum: Some(g::from_server::FromServerEnum::UpdateWorkload(plain)) }
            .encode_to_vec();
        assert_eq!(bytes, [0x0a, 0x00], "an empty UpdateWorkload (field 1), as Ankaios encodes it");
        let back = from_server_from_proto(g::FromServer::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(back, Some(FromServer::UpdateWorkload { added: Vec::new(), deleted: Vec::new(), resync: false }));
    }

    #[test]
    fn a_rendered_runtime_config_reaches_the_agent_as_the_server_hashed_it() {
        // A template may render trailing whitespace; the instance id hashes
        // it, so the agent must run exactly that text (found by fuzzing).
        let wl = Workload {
            agent: "agent_A".into(),
            runtime: "podman".into(),
            runtime_config: "image: busybox\ncommandArgs: [sh]   ".into(),
            ..Default::default()
        };
        let spec = WorkloadSpec::new(&WorkloadName::new("w").unwrap(), &AgentName::new("agent_A").unwrap(), wl);
        let m = FromServer::ServerHello(vec![spec]);
        assert_eq!(from_server_from_proto(from_server_to_proto(&m)).unwrap(), Some(m));
    }

    #[test]
    fn logs_messages_round_trip_through_the_wire() {
        let name = crate::WorkloadInstanceName::new(
            &WorkloadName::new("w").unwrap(),
            &AgentName::new("agent_A").unwrap(),
            "cfg",
        );
        let request = LogsRequest {
            workload_names: vec![name.clone()],
            follow: true,
            tail: 10,
            since: Some("10m".into()),
            until: None,
        };
        let m = FromServer::LogsRequest { request_id: "cli@1".into(), request };
        assert_eq!(from_server_from_proto(from_server_to_proto(&m)).unwrap(), Some(m));
        let m = FromServer::LogsCancelRequest { request_id: "cli@1".into() };
        assert_eq!(from_server_from_proto(from_server_to_proto(&m)).unwrap(), Some(m));
        let m = ToServer::LogEntriesResponse {
            request_id: "cli@1".into(),
            entries: vec![LogEntry { workload_name: name.clone(), message: "hello".into() }],
        };
        assert_eq!(to_server_from_proto(to_server_to_proto(&m)).unwrap(), Some(m));
        let m = ToServer::LogsStopResponse {
            request_id: "cli@1".into(),
            workload_name: name,
            reason: "agent 'A' has no container for it".into(),
        };
        assert_eq!(to_server_from_proto(to_server_to_proto(&m)).unwrap(), Some(m));
        // Options an Ankaios server leaves out mean: no follow, every line.
        let bare = logs_request_from_pb(pb::LogsRequest::default()).unwrap();
        assert_eq!((bare.follow, bare.tail, bare.since), (false, -1, None));
    }

    #[test]
    fn rendered_state_request_round_trips_as_request_102() {
        let r = Request {
            request_id: "cli@7".into(),
            content: RequestContent::RenderedState { field_mask: vec!["desiredState.workloads.w".into()] },
        };
        let pb = request_to_pb(&r);
        assert!(matches!(pb.request_content, Some(pb::request::RequestContent::RenderedStateRequest(_))));
        assert_eq!(request_from_pb(pb).unwrap(), r);
    }

    #[test]
    // [test of feature K2]
    fn agent_quota_and_its_use_round_trip_through_the_wire() {
        let hello = ToServer::AgentHello {
            agent_name: "agent_A".into(),
            protocol_version: "1".into(),
            tags: Default::default(),
            reports_conditions: true,
            capabilities: vec!["podman".into()],
            quota: QuotaLimits { max_workloads: 4, max_memory: 2 << 30 },
        };
        assert_eq!(to_server_from_proto(to_server_to_proto(&hello)).unwrap(), Some(hello));
        let load = ToServer::AgentLoadStatus {
            agent_name: "agent_A".into(),
            status: AgentStatus { cpu_usage: 7, free_memory: 1 },
            metrics: Default::default(),
            quota_used: QuotaUsage { workloads: 3, memory: 1 << 30 },
        };
        assert_eq!(to_server_from_proto(to_server_to_proto(&load)).unwrap(), Some(load));
        // An Ankaios agent says nothing of a quota: unlimited.
        let g::to_server::ToServerEnum::AgentHello(mut bare) = to_server_to_proto(&ToServer::AgentHello {
            agent_name: "a".into(),
            protocol_version: "1".into(),
            tags: Default::default(),
            reports_conditions: false,
            capabilities: Vec::new(),
            quota: QuotaLimits::default(),
        })
        .to_server_enum
        .unwrap() else {
            panic!("not a hello")
        };
        bare.max_workloads = 0;
        let back =
            to_server_from_proto(g::ToServer { to_server_enum: Some(g::to_server::ToServerEnum::AgentHello(bare)) });
        assert!(matches!(back, Ok(Some(ToServer::AgentHello { quota, .. })) if !quota.is_limited()));
    }

    #[test]
    fn added_workload_with_bad_dependency_name_is_rejected() {
        let mut w =
            pb::Workload { runtime: Some("podman".into()), runtime_config: Some("x".into()), ..Default::default() };
        w.dependencies = Some(pb::Dependencies { dependencies: [("a.b".to_owned(), 0)].into_iter().collect() });
        let a = g::AddedWorkload {
            instance_name: Some(pb::WorkloadInstanceName {
                workload_name: "w".into(),
                agent_name: "a".into(),
                id: "1".into(),
            }),
            workload: Some(w),
            generation: 1,
        };
        let e = added_from_pb(a).unwrap_err().to_string();
        assert!(e.contains("a.b"), "{e}");
    }
}
