//! Networking of containerd containers.
