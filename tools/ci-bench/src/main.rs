//! `ank-ci-bench`: measures the control interface of running workloads by
//! acting as them on the host side of their FIFOs
//! (`<run folder>/<agent>_io/<workload>.<id>/control_interface`). The
//! workloads themselves must not use their pipes meanwhile. `tools/ci-bench.sh`
//! runs it end to end against real podman.

mod events;
mod latency;
mod pipes;
mod stats;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "ank-ci-bench", about = "Measures the control interface by acting as workloads on their FIFOs")]
struct Cli {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Round trips of CompleteStateRequests, one after the other.
    Latency {
        /// The control_interface folder of a workload.
        #[arg(long)]
        pipes: PathBuf,
        /// How many requests.
        #[arg(long, default_value_t = 1000)]
        requests: usize,
        /// The field mask of each request.
        #[arg(long, default_value = "workloadStates")]
        mask: String,
    },
    /// Event delivery to subscribers while the first one changes a config.
    Events {
        /// The control_interface folders of the subscribers, comma separated;
        /// the first also makes the changes.
        #[arg(long, value_delimiter = ',', required = true)]
        pipes: Vec<PathBuf>,
        /// How many changes.
        #[arg(long, default_value_t = 100)]
        changes: usize,
        /// The field mask of the subscriptions.
        #[arg(long, default_value = "desiredState.configs")]
        mask: String,
        /// The config item set on each change (under desiredState.configs).
        #[arg(long, default_value = "bench")]
        config: String,
        /// Seconds to wait for missing events after the last change.
        #[arg(long, default_value_t = 10)]
        settle: u64,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().mode {
        Mode::Latency { pipes, requests, mask } => latency::run(&pipes, requests, &mask).await,
        Mode::Events { pipes, changes, mask, config, settle } => {
            let settle = Duration::from_secs(settle);
            events::run(events::Options { folders: pipes, changes, mask, config, settle }).await
        }
    }
}
