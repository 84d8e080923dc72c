//! `ank-server` binary: parses flags and the config file, then either
//! answers `--check` or loads the startup manifest and the TLS material,
//! binds and serves as a systemd-friendly daemon (readiness, status,
//! watchdog, health socket) until SIGTERM/SIGINT; SIGHUP reloads the
//! certificates.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use ank_common::daemon::{self, HealthSocket, Notifier};
use tokio_util::sync::CancellationToken;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (args, config_file) = match ank_server::config_file::parse_args() {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("ank-server: Config file could not be parsed: '{e}'");
            return ExitCode::FAILURE;
        }
    };
    if args.check {
        return ExitCode::from(daemon::health::run_check("ank-server", &args.health_socket()).await);
    }
    if let Err(e) = daemon::logging::init(&args.log_level) {
        eprintln!("ank-server: {e}");
        return ExitCode::from(2);
    }
    if let Some(path) = config_file.path {
        tracing::info!("using config file '{}'", path.display());
    }
    for warning in config_file.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = args.tls_conflict() {
        tracing::warn!("{warning}");
    }
    let tls = match args.tls_sources() {
        Ok(Some(sources)) => match ank_server::grpc::tls::ServerTls::load_with_crl(sources, args.tls.crl_pem.clone()) {
            Ok(tls) => Some(Arc::new(tls)),
            Err(e) => {
                eprintln!("ank-server: Failed to load certificate files!: '{e}'");
                return ExitCode::FAILURE;
            }
        },
        Ok(None) => {
            if args.tls.crl_pem.is_some() {
                tracing::warn!("--crl_pem is ignored without mTLS (--insecure)");
            }
            None
        }
        Err(e) => {
            eprintln!("ank-server: {}", e.daemon_message());
            return ExitCode::FAILURE;
        }
    };
    let state_file = args.state_file.clone().map(ank_server::state_file::StateFile::new);
    let unknown_fields =
        if args.strict_manifest { ank_server::UnknownFields::Reject } else { ank_server::UnknownFields::Warn };
    let initial =
        match ank_server::initial_state_with(state_file.as_ref(), args.startup_manifest.as_deref(), unknown_fields) {
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
    let listening = format!(
        "{} ({})",
        listener.local_addr().map_or_else(|_| args.address.to_string(), |a| a.to_string()),
        if tls.is_some() { "mTLS" } else { "insecure" }
    );
    tracing::info!("listening on {listening}");
    let shutdown = CancellationToken::new();
    tokio::spawn(wait_for_signal(shutdown.clone()));
    daemon::heap::spawn_trimmer(shutdown.clone());
    tokio::spawn(reload_on_sighup(tls.clone()));
    let policy = args.identity_policy();
    let options = ank_server::grpc::ServeOptions {
        tls,
        policy,
        heartbeat: args.heartbeat(),
        shutdown_grace: Duration::from_millis(args.shutdown_grace_ms),
        resync: args.resync(),
        jobs: args.jobs(),
        reaper: args.reaper(),
        placement: args.placement(),
        hooks: ank_server::hooks::HooksRegistry::new(args.hooks()),
        stream_limits: args.stream_limits(),
    };
    let (handle, serving) = match ank_server::start(initial, state_file, listener, options, shutdown.clone()) {
        Ok(started) => started,
        Err(e) => {
            eprintln!("ank-server: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let supervisor = supervise(&handle, &args, listening, &shutdown);
    let result = serving.await;
    ExitCode::from(daemon::finish("ank-server", result, &shutdown, supervisor).await)
}

/// Starts the health socket and the systemd supervisor; the returned task
/// ends after STOPPING=1 was sent.
fn supervise(
    handle: &ank_server::ServerHandle,
    args: &ank_server::cli::Args,
    listening: String,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let health = ank_server::health::follow(handle.counts(), listening);
    let socket_path = args.health_socket();
    HealthSocket::spawn_at(&socket_path, health.clone(), handle.pinger(), shutdown.clone());
    tokio::spawn(daemon::supervisor::supervise(
        Notifier::from_env(),
        health,
        handle.pinger(),
        daemon::notify::watchdog_interval(),
        shutdown.clone(),
    ))
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

/// SIGHUP reloads the certificates; without them (insecure) it is logged
/// and ignored, never fatal.
async fn reload_on_sighup(tls: Option<Arc<ank_server::grpc::tls::ServerTls>>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler; certificates cannot be reloaded");
        return;
    };
    while hup.recv().await.is_some() {
        let Some(tls) = &tls else {
            tracing::info!("SIGHUP received: nothing to reload (insecure, no certificates)");
            continue;
        };
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
        _ = term.recv() => tracing::info!("SIGTERM received; shutting down"),
        _ = int.recv() => tracing::info!("SIGINT received; shutting down"),
    }
    shutdown.cancel();
}
