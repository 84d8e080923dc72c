//! The message vocabulary between components, independent of gRPC: what the
//! server sends an agent or commander ([`FromServer`]), what they send the
//! server ([`ToServer`]), and requests/responses. The gRPC layers translate
//! these to and from the wire types in `convert`.

use std::collections::BTreeMap;

use crate::complete_state::AgentStatus;
use crate::instance_name::WorkloadInstanceName;
use crate::workload::{WorkloadSpec, WorkloadState};

mod wire;
pub use wire::{
    HookAnswer, from_server_from_proto, from_server_to_proto, hook_answer_from_proto, request_from_pb, request_to_pb,
    response_from_pb, response_to_pb, to_server_from_proto, to_server_to_proto, update_workload_to_proto,
};

/// The gRPC request header with which a CommandConnection client (this
/// project's `ank`) asks the server to push it the workload states it
/// pushes to agents; Ankaios sends commanders only the answers to their
/// requests, and so does this server without the header. A server that
/// pushes them sets the same header in its response, so a client knows
/// whether it must read the states itself.
pub const PUSH_STATES_HEADER: &str = "x-ank-push-workload-states";

/// Condition a dependent workload must meet before a deletion proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteCondition {
    Running,
    NotPendingNorRunning,
}

/// An instance the agent shall remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletedWorkload {
    pub instance_name: WorkloadInstanceName,
    pub dependencies: BTreeMap<String, DeleteCondition>,
}

/// What a log request asks of the agents running the named workloads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsRequest {
    pub workload_names: Vec<WorkloadInstanceName>,
    /// Keep streaming new lines until cancelled.
    pub follow: bool,
    /// Only the last N lines; negative means all.
    pub tail: i32,
    /// Only lines since this time (RFC 3339 or a duration like `10m`).
    pub since: Option<String>,
    /// Only lines until this time.
    pub until: Option<String>,
}

/// One line of a workload's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub workload_name: WorkloadInstanceName,
    pub message: String,
}

/// Messages from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum FromServer {
    /// All workloads of an agent, sent once after its hello.
    ServerHello(Vec<WorkloadSpec>),
    /// Workloads added and deleted since; deletes are processed first.
    /// `resync`: the server's TTL resync sent these again (nothing changed,
    /// nothing is to be rerun).
    UpdateWorkload { added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>, resync: bool },
    /// States of workloads (typically of other agents).
    UpdateWorkloadState(Vec<WorkloadState>),
    /// Answer to a request.
    Response(Response),
    /// Start sending the logs of the named workloads of this agent.
    LogsRequest { request_id: String, request: LogsRequest },
    /// Stop the log streams of a request.
    LogsCancelRequest { request_id: String },
}

/// Messages to the server.
#[derive(Debug, Clone, PartialEq)]
pub enum ToServer {
    AgentHello {
        agent_name: String,
        protocol_version: String,
        tags: BTreeMap<String, String>,
        /// Reports generations and conditions (this orchestrator's agents).
        reports_conditions: bool,
        /// Capabilities offered to agent selectors (extension field 100).
        capabilities: Vec<String>,
        /// The agent's workload quota (extension; unlimited from Ankaios).
        quota: crate::quota::QuotaLimits,
    },
    CommanderHello {
        protocol_version: String,
    },
    UpdateWorkloadState(Vec<WorkloadState>),
    AgentLoadStatus {
        agent_name: String,
        status: AgentStatus,
        /// Operator-declared metrics (extension field 100).
        metrics: BTreeMap<String, f64>,
        /// What the agent's workloads use of its quota (extension).
        quota_used: crate::quota::QuotaUsage,
    },
    Request(Request),
    Goodbye,
    /// Log lines for a log request.
    LogEntriesResponse {
        request_id: String,
        entries: Vec<LogEntry>,
    },
    /// The log stream of one workload of a request ended.
    LogsStopResponse {
        request_id: String,
        workload_name: WorkloadInstanceName,
        /// Why it had no (more) lines, empty when it ended normally (our
        /// extension: Ankaios' agent never sends one).
        reason: String,
    },
}

/// A request with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub request_id: String,
    pub content: RequestContent,
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestContent {
    CompleteState {
        field_mask: Vec<String>,
        subscribe_for_events: bool,
    },
    /// `new_state` is the (possibly partial) new complete state, typed.
    UpdateState {
        new_state: Box<crate::convert::PartialCompleteState>,
        update_mask: Vec<String>,
    },
    /// Stream the logs of workloads.
    Logs(LogsRequest),
    /// Stop the log streams of the request with this request's id.
    LogsCancel,
    /// End the event subscription opened with this request's id.
    EventsCancel,
    /// A new job over the unchanged desired state (extension).
    JobRerun {
        failed_only: bool,
    },
    /// End a running job (extension).
    JobInterrupt {
        job_id: u64,
    },
    /// The desired state as rendered for the agents, filtered by masks
    /// under `desiredState` (extension); answered with a complete state.
    RenderedState {
        field_mask: Vec<String>,
    },
}

/// Which paths of the complete state an event added, updated or removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlteredFields {
    pub added_fields: Vec<String>,
    pub updated_fields: Vec<String>,
    pub removed_fields: Vec<String>,
}

impl AlteredFields {
    pub fn is_empty(&self) -> bool {
        self.added_fields.is_empty() && self.updated_fields.is_empty() && self.removed_fields.is_empty()
    }
}

/// A response with the id of its request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub request_id: String,
    pub content: ResponseContent,
}

/// One mutating hook that changed workloads of an update (our extension).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HookChange {
    pub hook: String,
    pub workloads: Vec<String>,
}

/// What a response carries.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseContent {
    Error(String),
    /// The (filtered) complete state, typed; its JSON tree (`to_json`) has
    /// the camelCase shape of `ank get state`.
    CompleteState(Box<crate::convert::PartialCompleteState>),
    UpdateStateSuccess {
        added_workloads: Vec<String>,
        deleted_workloads: Vec<String>,
        /// The job the change became (0 from an Ankaios server).
        job_id: u64,
        /// The mutating hooks that changed workloads, in the order they ran
        /// (always empty from an Ankaios server).
        hook_changes: Vec<HookChange>,
    },
    /// The workloads of a log request that exist.
    LogsRequestAccepted(Vec<WorkloadInstanceName>),
    /// Lines of a log request.
    LogEntries(Vec<LogEntry>),
    /// The log of one workload of a request ended.
    LogsStop {
        workload_name: WorkloadInstanceName,
        /// Why it had no (more) lines; empty when it ended normally.
        reason: String,
    },
    LogsCancelAccepted,
    /// One event of a subscription: the changed parts of the complete state
    /// and which paths changed.
    Event {
        complete_state: Box<serde_json::Value>,
        altered_fields: AlteredFields,
    },
    EventsCancelAccepted,
}
