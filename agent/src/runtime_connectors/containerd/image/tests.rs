//! Tests against the real containerd.
