//! Domain model shared by `ank-server`, `ank-agent` and `ank`: validated
//! names, workloads, execution states, the complete state, manifest parsing,
//! field masks, the message vocabulary between components and the
//! conversions to and from the protobuf wire types. Pure logic, no I/O.

pub mod access_rules;
pub mod complete_state;
pub mod config_file;
pub mod config_renderer;
pub mod convert;
pub mod dependency_graph;
pub mod execution_state;
pub mod field_mask;
pub mod instance_name;
pub mod manifest;
pub mod manifest_v01;
pub mod messages;
pub mod names;
pub mod podman_config;
pub mod podman_kube_config;
pub mod timestamp;
pub mod tls;
pub mod workload;

pub use ank_proto::PROTOCOL_VERSION;
pub use complete_state::{AgentAttributes, AgentStatus, CompleteState, State, WorkloadStatesMap};
pub use execution_state::{ExecutionState, StateKind};
pub use instance_name::WorkloadInstanceName;
pub use names::{AgentName, NameError, WorkloadName};
pub use workload::{AddCondition, RestartPolicy, Workload, WorkloadState};

/// The only desired-state API version this release writes.
pub const API_VERSION: &str = "v1";

/// Whether a peer's protocol version shares our major number.
pub fn is_compatible_protocol(version: &str) -> bool {
    let ours = PROTOCOL_VERSION.split('.').next();
    let theirs = version.split('.').next();
    theirs.is_some_and(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit())) && ours == theirs
}
