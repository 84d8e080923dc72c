//! The `containerd` runtime connector: drives containerd over its own gRPC
//! API (no nerdctl, no child process per operation). Ankaios' third
//! runtime; `runtimeConfig` takes Ankaios' containerd shape (`image`,
//! `commandOptions`, `commandArgs`, `generalOptions`) with a documented
//! subset of `nerdctl run` options.
//!
//! Parts: [`run_options`] (the runtimeConfig and its options), [`oci_spec`]
//! (the OCI runtime spec of a container), [`image`] (image config, unpack,
//! pull), [`network`] (CNI bridge, ports, hosts and resolv.conf).

pub mod image;
pub mod image_config;
pub mod network;
pub mod oci_spec;
pub mod run_options;

/// The runtime name in workload specs.
pub const CONTAINERD: &str = "containerd";
