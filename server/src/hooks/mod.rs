//! Mutating hooks (Ankaios 1.1, beta): executables that see every change
//! of the workloads before the agents do, as a protobuf `UpdateWorkload` on
//! stdin, and answer on stdout with it unchanged, mutated, or veto it by
//! exiting non-zero. [`HooksRegistry`] owns the configured hooks in their
//! order and runs a chain of them; [`effect`] builds a chain's input and
//! applies its answer to the rendered state. Our additions: a timeout per
//! hook (the child is killed), a hook killed by a signal or answering
//! garbage refuses the update naming the hook and carrying its stderr, and
//! the chain is an async fn the server runs in a task of its own.

pub mod effect;
pub(crate) mod flow;
mod run;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ank_proto::grpc_api::UpdateWorkload;

pub use run::HookOutcome;

/// Where hooks are looked for when their entry names no `path`, as in Ankaios.
pub const DEFAULT_HOOKS_DIR: &str = "/usr/libexec/ankaios/hooks";
/// How long a hook may take when its entry names no `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(5000);
/// More hooks than this are run, but warned about at startup: each one is a
/// process per change (Ankaios' design assumes at most 10).
pub const MANY_HOOKS: usize = 10;

/// One configured hook: `<path>/<name>` is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    pub name: String,
    pub prio: u8,
    pub path: PathBuf,
    /// Our addition: after this the child is killed and the update refused.
    pub timeout: Duration,
}

impl HookConfig {
    /// The executable run for this hook.
    pub fn executable(&self) -> PathBuf {
        self.path.join(&self.name)
    }

    /// What keeps this hook from running, said at the server's start: a
    /// missing or non-executable file. The server still starts (as Ankaios
    /// does) and refuses every change of the workloads until it is fixed;
    /// skipping the hook instead would let through what it exists to stop.
    pub fn problem(&self) -> Option<String> {
        use std::os::unix::fs::PermissionsExt;
        let exe = self.executable();
        let consequence = "every change of the workloads is refused until it is there";
        match std::fs::metadata(&exe) {
            Err(e) => {
                Some(format!("mutating hook '{}': cannot use '{}' ({e}); {consequence}", self.name, exe.display()))
            }
            Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => Some(format!(
                "mutating hook '{}': '{}' is not an executable file; {consequence}",
                self.name,
                exe.display()
            )),
            Ok(_) => None,
        }
    }
}

/// Why a chain of hooks refused an update. The texts are Ankaios' where
/// Ankaios has the case (veto, spawn failure, undecodable answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The hook exited non-zero.
    // Ankaios: swdd~server-mutating-hook-veto~1
    #[error("Mutating hook '{hook}' vetoed the state change: 'Hook '{hook}' rejected the change: {stderr}'")]
    Veto { hook: String, stderr: String },
    /// The hook could not be run, timed out or was killed by a signal.
    #[error("Mutating hook '{hook}' execution failed: '{reason}'")]
    Failed { hook: String, reason: String },
    /// The hook's answer is no `UpdateWorkload`, or not a valid one.
    #[error("Resulting State is invalid, reason: 'Failed to decode protobuf output from hook '{hook}': {reason}'{}", stderr_note(.stderr))]
    Invalid { hook: String, reason: String, stderr: String },
}

impl HookError {
    /// The error a client gets for the refused update, as Ankaios words it:
    /// `Update rejected by mutating hook '<name>': '<reason>'` for a veto,
    /// `Update rejected: '<error>'` for the rest.
    // Ankaios: swdd~server-mutating-hook-veto~1
    pub fn rejection(&self) -> String {
        match self {
            Self::Veto { hook, stderr } => {
                format!("Update rejected by mutating hook '{hook}': 'Hook '{hook}' rejected the change: {stderr}'")
            }
            other => format!("Update rejected: '{other}'"),
        }
    }
}

fn stderr_note(stderr: &str) -> String {
    if stderr.is_empty() { String::new() } else { format!(" (hook stderr: '{stderr}')") }
}

/// The configured hooks, sorted by priority; cheap to clone into a task.
#[derive(Debug, Clone, Default)]
pub struct HooksRegistry {
    hooks: Arc<[HookConfig]>,
}

impl HooksRegistry {
    /// Sorts `hooks` by ascending priority, equal priorities in the order
    /// given (a stable sort), and warns when there are many.
    // Ankaios: swdd~server-sorts-mutating-hooks-by-priority~1
    pub fn new(mut hooks: Vec<HookConfig>) -> Self {
        hooks.sort_by_key(|h| h.prio);
        if hooks.len() > MANY_HOOKS {
            tracing::warn!(
                "{} mutating hooks configured, more than {MANY_HOOKS}: every change of the workloads starts one process per hook",
                hooks.len()
            );
        }
        if !hooks.is_empty() {
            let list: Vec<String> =
                hooks.iter().map(|h| format!("'{}' (prio {})", h.executable().display(), h.prio)).collect();
            tracing::info!("mutating hooks (beta), in this order: {}", list.join(", "));
        }
        for problem in hooks.iter().filter_map(HookConfig::problem) {
            tracing::error!("{problem}");
        }
        Self { hooks: hooks.into() }
    }

    /// Whether no hook is configured: the server's path without hooks.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks in the order they run.
    pub fn hooks(&self) -> &[HookConfig] {
        &self.hooks
    }

    /// Runs every hook in order on `input`, each on the previous one's
    /// answer; the first refusal ends the chain.
    // Ankaios: swdd~server-executes-mutating-hooks-as-subprocess~1
    pub async fn run(&self, input: UpdateWorkload) -> Result<HookOutcome, HookError> {
        run::chain(&self.hooks, input).await
    }
}

#[cfg(test)]
mod tests;
