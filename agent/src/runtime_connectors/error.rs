//! [`RuntimeError`]: why a runtime operation failed. The variant says which
//! operation (and so which state the workload is reported in, and whether a
//! retry is worth it); its source, a [`RuntimeFailure`], says what the
//! runtime said, typed where the connector has a type for it. The texts are
//! the ones users see in the workload's state info.

use crate::runtime_connectors::runtime_config::RuntimeConfigError;

use super::podman::cli::PodmanError;

/// What a runtime said when an operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeFailure {
    /// A podman invocation failed (the podman and podman-kube connectors).
    #[error(transparent)]
    Podman(#[from] PodmanError),
    /// The operation took longer than it may.
    #[error("{what} timed out")]
    TimedOut { what: String },
    /// The workload's runtime is not one of this agent's.
    #[error("runtime '{0}' is not supported by this agent")]
    NotSupported(String),
    /// Any other reason, in the runtime's (or the connector's) words.
    #[error("{0}")]
    Other(String),
}

impl RuntimeFailure {
    /// The words worth showing a user: podman's stderr alone when podman
    /// failed, the whole reason otherwise.
    pub fn message(&self) -> String {
        match self {
            RuntimeFailure::Podman(e) => e.message(),
            other => other.to_string(),
        }
    }
}

impl From<String> for RuntimeFailure {
    fn from(reason: String) -> Self {
        RuntimeFailure::Other(reason)
    }
}

/// Why a runtime operation failed; the variants decide the reported state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The workload's runtimeConfig does not read (never worth a retry).
    #[error(transparent)]
    Config(#[from] RuntimeConfigError),
    /// The workload cannot run as it is configured (never worth a retry).
    #[error("{0}")]
    InvalidConfig(String),
    /// The runtime refused to create the workload (e.g. podman's stderr).
    #[error("{}", .0.message())]
    Create(#[source] RuntimeFailure),
    /// The runtime failed to delete the workload.
    #[error("{}", .0.message())]
    Delete(#[source] RuntimeFailure),
    /// Listing the runtime's containers failed.
    #[error("{0}")]
    List(#[source] RuntimeFailure),
    /// The runtime could not be used at all (not startable, or nothing to
    /// ask it about).
    #[error("{0}")]
    Unavailable(#[source] RuntimeFailure),
}

impl RuntimeError {
    /// A create the runtime refused for `reason`.
    pub fn create(reason: impl Into<RuntimeFailure>) -> Self {
        RuntimeError::Create(reason.into())
    }

    /// A delete that failed for `reason`.
    pub fn delete(reason: impl Into<RuntimeFailure>) -> Self {
        RuntimeError::Delete(reason.into())
    }

    /// A listing that failed for `reason`.
    pub fn list(reason: impl Into<RuntimeFailure>) -> Self {
        RuntimeError::List(reason.into())
    }

    /// A runtime that cannot be used, for `reason`.
    pub fn unavailable(reason: impl Into<RuntimeFailure>) -> Self {
        RuntimeError::Unavailable(reason.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> PodmanError {
        PodmanError::Failed { command: "run".into(), stderr: "Error: name in use".into() }
    }

    #[test]
    fn create_and_delete_show_podmans_words_list_and_unavailable_the_whole_reason() {
        assert_eq!(RuntimeError::create(failed()).to_string(), "Error: name in use");
        assert_eq!(RuntimeError::delete(failed()).to_string(), "Error: name in use");
        assert_eq!(RuntimeError::list(failed()).to_string(), "podman run failed: Error: name in use");
        let spawn = PodmanError::Spawn { binary: "podman".into(), reason: "No such file".into() };
        assert_eq!(RuntimeError::unavailable(spawn).to_string(), "could not run 'podman': No such file");
        let timed_out = RuntimeFailure::TimedOut { what: "deleting container 'abc'".into() };
        assert_eq!(RuntimeError::delete(timed_out).to_string(), "deleting container 'abc' timed out");
        let other = RuntimeFailure::NotSupported("containerd".into());
        assert_eq!(RuntimeError::delete(other).to_string(), "runtime 'containerd' is not supported by this agent");
    }

    #[test]
    fn the_runtimes_error_is_the_source() {
        use std::error::Error;
        let err = RuntimeError::create(failed());
        let source = err.source().expect("a source");
        assert_eq!(source.to_string(), "podman run failed: Error: name in use");
    }
}
