//! The Ankaios v1 wire protocol, generated from the `.proto` files in
//! `proto/`: `ank_base` (state and requests), `control_api` (workload FIFOs)
//! and `grpc_api` (server <-> agent/CLI streams), the protocol version, how
//! clients dial the server ([`dial`]), the frames of the control-interface
//! pipes ([`framing`]) and the size limit of one gRPC message
//! on every endpoint ([`limits`]).

#![allow(clippy::all, clippy::pedantic, missing_docs)]

pub mod dial;
pub mod framing;
pub mod limits;
mod tls_connector;

pub use limits::MAX_MESSAGE_BYTES;

/// Base messages shared by every interface.
pub mod ank_base {
    tonic::include_proto!("ank_base");
}

/// Messages of the control interface between a workload and its agent.
pub mod control_api {
    tonic::include_proto!("control_api");
}

/// Messages and services of the server's gRPC interface.
pub mod grpc_api {
    tonic::include_proto!("grpc_api");
}
