//! What makes `ank-server` and `ank-agent` good systemd services, shared by
//! both (feature `daemon`): logging for a terminal or the journal
//! ([`logging`]), the sd_notify protocol ([`notify`]), liveness pings
//! ([`ping`]), the health socket behind `--check` ([`health`]) and the task
//! that tells systemd about readiness, status, the watchdog and stopping
//! ([`supervisor`]).

pub mod clock;
pub mod health;
pub mod heap;
pub mod logging;
pub mod notify;
pub mod ping;
pub mod supervisor;

pub use health::{Health, HealthSocket};
pub use notify::Notifier;
pub use ping::{Ping, Pinger};

/// The end of a daemon's `main`: makes sure shutdown was signalled, waits
/// for the supervisor (so STOPPING=1 went out), logs the stop or prints the
/// error, and returns the exit code (0 stopped, 1 failed).
pub async fn finish<E: std::fmt::Display>(
    binary: &str,
    result: Result<(), E>,
    shutdown: &tokio_util::sync::CancellationToken,
    supervisor: tokio::task::JoinHandle<()>,
) -> u8 {
    shutdown.cancel();
    let _ = supervisor.await;
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            0
        }
        Err(e) => {
            eprintln!("{binary}: error: {e:#}");
            1
        }
    }
}
