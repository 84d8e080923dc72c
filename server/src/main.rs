//! `ank-server` binary: parses flags and the config file, loads the startup
//! manifest and the TLS material, binds and serves until SIGTERM/SIGINT;
//! SIGHUP reloads the certificates.

use std::process::ExitCode;
use std::sync::Arc;

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
    let tls = match args.tls_sources() {
        Ok(Some(sources)) => match ank_server::grpc::tls::ServerTls::load(sources) {
            Ok(tls) => Some(Arc::new(tls)),
            Err(e) => {
                eprintln!("ank-server: {e}");
                return ExitCode::from(2);
            }
        },
        Ok(None) => None,
        Err(e) => {
            eprintln!("ank-server: {e}");
            return ExitCode::from(2);
        }
    };
    let state_file = args.state_file.clone().map(ank_server::state_file::StateFile::new);
    let initial = match ank_server::initial_state(state_file.as_ref(), args.startup_manifest.as_deref()) {
        Ok((state, source)) => {
            log_initial_source(source, &args);
            state
        }
        Err(e) => {
            eprintln!("ank-server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match tokio::net::TcpListener::bind(args.address).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ank-server: cannot listen on {}: {e}", args.address);
            return ExitCode::FAILURE;
        }
    };
    tracing::info!("listening on {} ({})", args.address, if tls.is_some() { "mTLS" } else { "insecure" });
    let shutdown = CancellationToken::new();
    tokio::spawn(wait_for_signal(shutdown.clone()));
    if let Some(tls) = &tls {
        tokio::spawn(reload_on_sighup(tls.clone()));
    }
    let policy = ank_server::grpc::identity::IdentityPolicy {
        check_agent_names: !args.allow_any_agent_name,
        read_only_clients: args.read_only_clients.clone(),
    };
    let options = ank_server::grpc::ServeOptions { tls, policy, heartbeat: args.heartbeat() };
    match ank_server::run_with(initial, state_file, listener, options, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn log_initial_source(source: ank_server::InitialSource, args: &ank_server::cli::Args) {
    let file = args.state_file.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
    match (source, &args.startup_manifest) {
        (ank_server::InitialSource::StateFile, Some(m)) => {
            tracing::info!("desired state loaded from state file '{file}'; startup manifest '{}' not used", m.display())
        }
        (ank_server::InitialSource::StateFile, None) => tracing::info!("desired state loaded from state file '{file}'"),
        (ank_server::InitialSource::StartupManifest, _) | (ank_server::InitialSource::Empty, _) => {
            if args.state_file.is_some() {
                tracing::info!("desired state saved to state file '{file}' from now on");
            }
        }
    }
}

async fn reload_on_sighup(tls: Arc<ank_server::grpc::tls::ServerTls>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler; certificates cannot be reloaded");
        return;
    };
    while hup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => tracing::info!("certificates reloaded; new connections use them"),
            Err(e) => tracing::error!("certificates not reloaded, keeping the old ones: {e}"),
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
