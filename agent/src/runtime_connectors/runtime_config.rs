//! [`RuntimeConfigError`]: why a workload's runtimeConfig cannot be read,
//! for the connectors that parse it (`podman`, `podman-kube`, `containerd`).

/// A runtimeConfig the runtime can never use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeConfigError {
    /// The text does not read as this runtime's config.
    #[error("invalid {runtime} runtimeConfig: {reason}")]
    Unreadable { runtime: &'static str, reason: String },
    /// A mandatory field is empty.
    #[error("invalid {runtime} runtimeConfig: field '{field}' must not be empty")]
    Empty { runtime: &'static str, field: &'static str },
}

impl RuntimeConfigError {
    /// The first line of a YAML error (the rest repeats the input).
    pub(crate) fn unreadable(runtime: &'static str, error: &impl std::fmt::Display) -> Self {
        let text = error.to_string();
        RuntimeConfigError::Unreadable { runtime, reason: text.lines().next().unwrap_or("").to_owned() }
    }
}
