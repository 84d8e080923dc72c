//! `ank-server-scale`: measures an `ank-server` binary (and optionally an
//! Eclipse Ankaios reference server, alternately) with 10 to 200
//! in-process agents of 20 workloads each. See `tools/bench/README.md`.

use std::path::PathBuf;

use ank_server_scale::run::{RunOptions, run};
use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "ank-server-scale", about = "Measures ank-server with up to 200 agents of 20 workloads each")]
struct Cli {
    /// The ank-server binary measured
    #[arg(long, default_value = "target/release/ank-server")]
    server: PathBuf,
    /// An Eclipse Ankaios ank-server, measured alternately with ours
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Numbers of agents, comma separated
    #[arg(long, value_delimiter = ',', default_value = "10,25,50,100,200")]
    sizes: Vec<usize>,
    /// Rounds per size and server (the report shows medians)
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Event subscribers following workloadStates throughout
    #[arg(long, default_value_t = 10)]
    subscribers: usize,
    /// Where all samples are written
    #[arg(long, default_value = "target/server-scale.json")]
    json: PathBuf,
    /// Where the plot is written
    #[arg(long, default_value = "docs/benchmarks-server-scale.svg")]
    svg: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    anyhow::ensure!(cli.sizes.iter().all(|&n| n > 0), "every size must be at least 1 agent");
    let options = RunOptions {
        server: cli.server,
        reference: cli.reference,
        sizes: cli.sizes,
        rounds: cli.rounds,
        subscribers: cli.subscribers,
        json: cli.json,
        svg: cli.svg,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let outcome = runtime.block_on(run(&options))?;
    anyhow::ensure!(outcome.failures.is_empty(), "{} measurements failed", outcome.failures.len());
    Ok(())
}
