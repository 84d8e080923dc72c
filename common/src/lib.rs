//! Domain model shared by `ank-server`, `ank-agent` and `ank`: validated
//! names, workloads, execution states, the complete state, manifest parsing,
//! field masks, the message vocabulary between components and the
//! conversions to and from the protobuf wire types. Pure logic, no I/O,
//! except the systemd integration of the daemons in [`daemon`] (feature
//! `daemon`).

pub mod access_rules;
pub mod agent_status;
pub mod complete_state;
pub mod conditions;
pub mod config_file;
pub mod config_renderer;
pub mod convert;
#[cfg(feature = "daemon")]
pub mod daemon;
pub mod dependency_graph;
pub mod duration;
pub mod execution_state;
pub mod field_mask;
pub mod groups;
pub mod health_spec;
pub mod instance_name;
pub mod jobs;
pub mod manifest;
#[cfg(feature = "schema")]
pub mod manifest_schema;
pub mod mask_path;
pub mod messages;
pub mod names;
pub mod placement;
pub mod quota;
#[cfg(feature = "schema")]
mod schema_parts;
pub mod seq_macro;
pub mod template_guard;
pub mod template_helpers;
pub mod timestamp;
pub mod tls;
pub mod tls_flags;
pub mod version;
pub mod workload;
pub mod workload_events;
pub mod workload_policy;

pub use complete_state::{AgentAttributes, AgentStatus, CompleteState, InstanceEntry, State, WorkloadStatesMap};
pub use conditions::InstanceStatus;
pub use execution_state::{ExecutionState, StateKind};
pub use instance_name::WorkloadInstanceName;
pub use names::{AgentName, NameError, WorkloadName};
/// Protocol version sent in hellos: the Ankaios version we speak.
pub use version::ANKAIOS_VERSION as PROTOCOL_VERSION;
pub use workload::{AddCondition, RestartPolicy, Workload, WorkloadState};

/// The only desired-state API version this release writes.
pub const API_VERSION: &str = "v1";

/// Whether a peer's protocol version shares our major number
/// ([`version::check_compatibility`] says why not).
pub fn is_compatible_protocol(version: &str) -> bool {
    version::check_compatibility(version).is_ok()
}

#[cfg(test)]
mod protocol_tests {
    use super::*;

    #[test]
    fn protocol_versions_compare_by_semver_major() {
        for ok in ["1.0.0", "1.0.1", "1.1.0-pre", "1.2.3+build.5"] {
            assert!(is_compatible_protocol(ok), "{ok}");
        }
        for bad in ["0.7.0", "2.0.0", "1", "1.0", "1.garbage", "01.0.0", "1.0.0-", "", "v1.0.0"] {
            assert!(!is_compatible_protocol(bad), "{bad}");
        }
    }
}
