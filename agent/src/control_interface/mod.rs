//! The control interface of workloads: the frame codec of the two FIFOs
//! ([`framing`]) and the [`authorizer`] that decides, from a workload's
//! access rules, which of its requests reach the server.

pub mod authorizer;
#[cfg(test)]
mod authorizer_props;
pub mod fifo;
/// The frame codec lives with the wire protocol, so workloads' clients share it.
pub use ank_proto::framing;
pub mod input_pipe;
pub mod pipes;
pub mod registry;
#[cfg(test)]
mod self_report_tests;
pub mod session;
