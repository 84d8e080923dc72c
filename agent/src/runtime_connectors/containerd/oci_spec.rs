//! The OCI runtime spec of a containerd container.
