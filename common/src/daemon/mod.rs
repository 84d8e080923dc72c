//! What makes `ank-server` and `ank-agent` good systemd services, shared by
//! both (feature `daemon`): logging for a terminal or the journal
//! ([`logging`]), the sd_notify protocol ([`notify`]), liveness pings
//! ([`ping`]), the health socket behind `--check` ([`health`]) and the task
//! that tells systemd about readiness, status, the watchdog and stopping
//! ([`supervisor`]).

pub mod health;
pub mod logging;
pub mod notify;
pub mod ping;
pub mod supervisor;

pub use health::{Health, HealthSocket};
pub use notify::Notifier;
pub use ping::{Ping, Pinger};
