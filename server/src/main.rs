//! `ank-server` binary: parses flags and the config file, loads the startup
//! manifest, binds and serves until SIGTERM/SIGINT.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

fn init_logging(level: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (args, config_file) = match ank_server::config_file::parse_args() {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("ank-server: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(&args.log_level);
    if let Some(path) = config_file {
        tracing::info!("using config file '{}'", path.display());
    }
    if let Err(e) = args.validate() {
        eprintln!("ank-server: {e}");
        return ExitCode::from(2);
    }
    let initial = match &args.startup_manifest {
        Some(path) => match ank_server::load_startup_manifest(path) {
            Ok(state) => state,
            Err(e) => {
                eprintln!("ank-server: {e}");
                return ExitCode::FAILURE;
            }
        },
        None => ank_common::State { api_version: ank_common::API_VERSION.to_owned(), ..Default::default() },
    };
    let listener = match tokio::net::TcpListener::bind(args.address).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ank-server: cannot listen on {}: {e}", args.address);
            return ExitCode::FAILURE;
        }
    };
    tracing::info!("listening on {} (insecure)", args.address);
    let shutdown = CancellationToken::new();
    tokio::spawn(wait_for_signal(shutdown.clone()));
    match ank_server::run(initial, listener, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}
