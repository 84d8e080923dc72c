//! Conversions between the protobuf wire types and the domain model. Input
//! from the wire is validated here: a bad name or a missing field becomes a
//! [`ConvertError`] naming the field, never a panic.

mod groups;
mod health;
mod jobs;
mod partial;
mod select;
pub mod size;
mod state;
mod workload;
mod workload_policy;

pub use partial::{
    PartialAgent, PartialCompleteState, PartialInstance, PartialState, PartialStatesMap, PartialWorkload,
    complete_state_from_json, complete_state_to_json, state_to_proto,
};
pub use select::{partial_states, selects_typed};
pub use state::{
    execution_state_from_proto, execution_state_to_proto, instance_name_from_proto, instance_name_to_proto,
    workload_state_from_proto, workload_state_to_proto,
};
pub(crate) use workload::{workload_from_pb, workload_to_pb};

/// A wire message that cannot be turned into the domain model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid message: {0}")]
pub struct ConvertError(pub String);

impl ConvertError {
    pub(crate) fn missing(field: &str) -> Self {
        ConvertError(format!("field '{field}' is missing"))
    }
}
