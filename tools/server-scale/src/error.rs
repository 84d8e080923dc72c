//! [`ScaleError`]: everything that can end a measurement, each variant
//! naming what it was doing (the server binary, the process, the wait).

use std::path::PathBuf;
use std::time::Duration;

use ank_cli::connection::ConnectionError;

/// Why a measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    #[error("cannot start the server '{}'", .path.display())]
    ServerSpawn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the server '{}' did not listen on {addr} within {} s", .path.display(), .after.as_secs())]
    ServerNotListening { path: PathBuf, addr: String, after: Duration },
    #[error("the server '{}' exited early ({status})", .path.display())]
    ServerExited { path: PathBuf, status: std::process::ExitStatus },
    #[error("cannot read /proc/{pid}/{file}")]
    Proc {
        pid: u32,
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("/proc/{pid}/{file} has no field '{field}'")]
    ProcFormat { pid: u32, file: &'static str, field: &'static str },
    #[error("the command connection failed while {doing}")]
    Connection {
        doing: &'static str,
        #[source]
        source: ConnectionError,
    },
    #[error("the server answered {doing} with: {answer}")]
    Rejected { doing: &'static str, answer: String },
    #[error("timed out after {} s waiting for {what}", .after.as_secs_f64())]
    Timeout { what: String, after: Duration },
    #[error("the event subscription ended while waiting for {waiting_for}: {reason}")]
    SubscriptionEnded { waiting_for: String, reason: String },
    #[error("{}; the server's first warnings:\n{log}", crate::run::error_chain(.error.as_ref()))]
    WithServerLog { error: Box<ScaleError>, log: String },
    #[error("the manifest '{}' cannot be turned into a request: {reason}", .path.display())]
    Manifest { path: PathBuf, reason: String },
    #[error("cannot write '{}'", .path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a temporary folder")]
    TempDir(#[source] std::io::Error),
    #[error("cannot serialize the samples")]
    Json(#[from] serde_json::Error),
    #[error("the fake runtimes show a wrong result: {0}")]
    Incorrect(String),
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, ScaleError>;
