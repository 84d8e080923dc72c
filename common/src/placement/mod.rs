//! Placement by constraints (the Krake scheduler ideas): the constraint
//! language of a workload's `agentSelector`.

pub mod constraint;
