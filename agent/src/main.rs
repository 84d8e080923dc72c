//! `ank-agent`: parses the command line and the config file, sets up
//! logging and runs the agent library until SIGTERM or SIGINT.

use std::io::IsTerminal;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_logging(level: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// Cancels `token` on the first SIGTERM or SIGINT.
async fn cancel_on_signal(token: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    token.cancel();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (cli, config_file) = match ank_agent::config_file::parse_cli() {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("ank-agent: error: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&cli.log_level);
    if let Some(path) = config_file {
        tracing::info!("using config file '{}'", path.display());
    }
    let config = match cli.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ank-agent: error: {e}");
            return ExitCode::from(2);
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    match ank_agent::run(config, ank_agent::default_runtimes(), shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-agent: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
