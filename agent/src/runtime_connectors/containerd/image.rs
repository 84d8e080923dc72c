//! Images for containerd containers.
