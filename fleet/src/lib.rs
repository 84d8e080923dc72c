//! The fleet tier: one `ank-server` per vehicle, fed through an MQTT 5
//! broker. [`connector`] is the workload on each vehicle that applies what
//! the fleet publishes through the control interface and reports back;
//! [`cli`] is `ank-fleet`, the operator's side, which talks only to the
//! broker. [`topics`] and [`payload`] are the contract between the two
//! (docs/fleet.md), [`mqtt`] builds the broker connection both use and
//! [`selector`] matches vehicles by their labels; [`signing`] signs and
//! verifies desired-state messages with the operator's Ed25519 key.

pub mod cli;
pub mod connector;
pub mod link;
pub mod mqtt;
pub mod payload;
pub mod selector;
pub mod signing;
pub mod topics;

/// Logs to stderr at `level` unless `RUST_LOG` says otherwise.
pub fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}
