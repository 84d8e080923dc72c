//! `ank-agent`: parses the command line and the config file, sets up
//! logging, and either answers `--check` or runs the agent library as a
//! systemd-friendly daemon (readiness, status, watchdog, health socket)
//! until SIGTERM or SIGINT.

use std::process::ExitCode;

use ank_common::daemon::{self, HealthSocket, Notifier, Pinger};
use tokio_util::sync::CancellationToken;

/// Cancels `token` on the first SIGTERM or SIGINT. SIGHUP (`systemctl
/// reload`) must not kill the agent: it has nothing to reload, as it reads
/// its certificates at every connect.
async fn cancel_on_signal(token: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup()))
    else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
            _ = hup.recv() => {
                tracing::info!("SIGHUP received: nothing to reload (certificates are read at every connect)");
                continue;
            }
        }
        break;
    }
    token.cancel();
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Start-up errors exit with 1, as Ankaios' agent does (clap's usage
    // errors keep their 2).
    let (cli, config_file) = match ank_agent::config_file::parse_cli() {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("ank-agent: error: Config file could not be parsed: '{e}'");
            return ExitCode::FAILURE;
        }
    };
    if cli.check {
        return match cli.health_socket() {
            Ok(path) => ExitCode::from(daemon::health::run_check("ank-agent", &path).await),
            Err(e) => {
                eprintln!("ank-agent: error: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Err(e) = daemon::logging::init(&cli.log_level) {
        eprintln!("ank-agent: error: {e}");
        return ExitCode::from(2);
    }
    if let Some(path) = config_file.path {
        tracing::info!("using config file '{}'", path.display());
    }
    for warning in config_file.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = cli.tls_conflict() {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = cli.insecure_https_warning() {
        tracing::warn!("{warning}");
    }
    let mut runtimes = cli.runtimes();
    match cli.select_runtimes(&mut runtimes) {
        Ok(warnings) => warnings.iter().for_each(|w| tracing::warn!("{w}")),
        Err(e) => {
            eprintln!("ank-agent: error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let config = match cli.into_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ank-agent: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    daemon::heap::spawn_trimmer(shutdown.clone());

    let (board, health) = ank_agent::health::HealthBoard::new(&config.server_url);
    let (pinger, pings) = Pinger::channel();
    // The run folder is checked before the health socket goes in it.
    if let Err(e) = ank_common::AgentName::new(config.name.as_str())
        .map_err(anyhow::Error::from)
        .and_then(|name| Ok(ank_agent::run_folder::prepare(&config.run_folder, &name)?))
    {
        eprintln!("ank-agent: error: {e}");
        return ExitCode::FAILURE;
    }
    let socket_path = ank_agent::health::socket_path(&config.run_folder, &config.name);
    HealthSocket::spawn_at(&socket_path, health.clone(), pinger.clone(), shutdown.clone());
    let supervisor = tokio::spawn(daemon::supervisor::supervise(
        Notifier::from_env(),
        health,
        pinger,
        daemon::notify::watchdog_interval(),
        shutdown.clone(),
    ));
    let result = ank_agent::run_supervised(config, runtimes, shutdown.clone(), board, pings).await;
    ExitCode::from(daemon::finish("ank-agent", result, &shutdown, supervisor).await)
}
