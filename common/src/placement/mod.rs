//! Placement by constraints (the Krake scheduler ideas): the constraint
//! language of a workload's `agentSelector` and the metrics agents
//! advertise.

pub mod constraint;
pub mod metrics;
