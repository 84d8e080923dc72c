//! Command line of `ank-agent` (clap derive) and its validation into an
//! [`AgentConfig`]: mTLS with `--ca_pem`, `--crt_pem`, `--key_pem` (and
//! an `https://` server URL), or `--insecure` (an `http://` one); with
//! neither the agent refuses to start and says why.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ank_common::tls;
use ank_common::tls_flags::{TlsArgs, TlsFlavor};
use clap::Parser;

use crate::AgentConfig;

/// Default server address with TLS.
pub const DEFAULT_SERVER_URL: &str = "https://127.0.0.1:25551";
/// Default server address with `--insecure`.
pub const DEFAULT_INSECURE_SERVER_URL: &str = "http://127.0.0.1:25551";

/// The agent's names and help texts of the shared connection flags.
#[derive(Debug, Clone, Default)]
pub struct AgentTls;

impl TlsFlavor for AgentTls {
    const INSECURE_ENV: &'static str = "ANKAGENT_INSECURE";
    const CA_PEM_ENV: &'static str = "ANKAGENT_CA_PEM";
    const CRT_PEM_ENV: &'static str = "ANKAGENT_CRT_PEM";
    const KEY_PEM_ENV: &'static str = "ANKAGENT_KEY_PEM";
    const CRL_PEM_ENV: &'static str = "ANKAGENT_CRL_PEM";
    const INSECURE_HELP: &'static str = "Connect without TLS";
    const CA_PEM_HELP: &'static str = "CA certificate (PEM) for mTLS";
    const CRT_PEM_HELP: &'static str = "Agent certificate (PEM) for mTLS";
    const KEY_PEM_HELP: &'static str = "Agent key (PEM) for mTLS";
    const CRL_PEM_HELP: &'static str = "With mTLS: a PEM file of certificate revocation lists of the CA; a server \
                                        certificate they revoke is refused (read at every connect)";
    const GLOBAL: bool = false;
    fn bool_parser() -> clap::builder::ValueParser {
        clap::builder::BoolishValueParser::new().into()
    }
}

/// Flags of `ank-agent`.
#[derive(Debug, Clone, Parser)]
#[command(name = "ank-agent", version = ank_common::version::VERSION_LINE, about = "Ankaios-compatible agent: runs the server's workloads on this node")]
pub struct Cli {
    /// Unique name of this agent ([A-Za-z0-9_-]); from the config file if not given.
    #[arg(short = 'n', long)]
    pub name: Option<String>,
    /// URL of the server [default: https://127.0.0.1:25551, http:// with --insecure].
    #[arg(short = 's', long)]
    pub server_url: Option<String>,
    /// Folder for workload files and control interface pipes [default: $TMPDIR/ankaios or /tmp/ankaios].
    #[arg(short = 'r', long)]
    pub run_folder: Option<PathBuf>,
    /// `-k, --insecure` and the mTLS items (`--ca_pem`, `--crt_pem`,
    /// `--key_pem`, `--crl_pem`), with the `ANKAGENT_*` variables.
    #[command(flatten)]
    pub tls: TlsArgs<AgentTls>,
    /// Agent tag (label for agent selectors) as key=value; repeatable.
    #[arg(short = 't', long = "tag", visible_alias = "label", value_name = "KEY=VALUE", value_parser = parse_tag)]
    pub tags: Vec<(String, String)>,
    /// A capability this agent offers to agent selectors besides its
    /// runtimes (podman, podman-kube), e.g. gpu or /dev/dri; repeatable
    /// (env: comma-separated).
    #[arg(long = "capability", env = "ANKAGENT_CAPABILITIES", value_delimiter = ',', value_name = "NAME", value_parser = parse_capability)]
    pub capabilities: Vec<String>,
    /// A static metric this agent advertises to agent selectors as
    /// name=number, besides the built-in cpu_usage and free_memory_mb;
    /// repeatable (env: comma-separated).
    #[arg(long = "metric", env = "ANKAGENT_METRICS", value_delimiter = ',', value_name = "NAME=VALUE", value_parser = parse_metric)]
    pub metrics: Vec<(String, f64)>,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Limited retry mode (seed 002): retry a failed workload create N times,
    /// --create-retry-interval-ms apart, then Pending(StartingFailed)
    /// [default: retried without limit with exponential backoff from 0.5 s
    /// to 5 min, as Ankaios].
    #[arg(long, env = "ANKAGENT_CREATE_RETRIES", value_name = "N")]
    pub create_retries: Option<u32>,
    /// How many workload creates may run at the same time (a create slower
    /// than 2 s stops counting); by default two per CPU core, 2 to 10.
    #[arg(long, env = "ANKAGENT_MAX_PARALLEL_CREATES", default_value_t = default_parallel_creates(), hide_default_value = true, value_name = "N")]
    pub max_parallel_creates: usize,
    /// Milliseconds between two retries of a failed create in the limited
    /// mode [default: 1000]; given alone, it selects that mode with 20 retries.
    #[arg(long, env = "ANKAGENT_CREATE_RETRY_INTERVAL_MS", value_name = "MS")]
    pub create_retry_interval_ms: Option<u64>,
    /// Milliseconds between two heartbeats (HTTP/2 PINGs) to the server; 0: none.
    #[arg(long, env = "ANKAGENT_HEARTBEAT_INTERVAL_MS", default_value_t = 1000, value_name = "MS")]
    pub heartbeat_interval_ms: u64,
    /// Milliseconds a heartbeat may go unanswered before the agent reconnects.
    #[arg(long, env = "ANKAGENT_HEARTBEAT_TIMEOUT_MS", default_value_t = 2000, value_name = "MS")]
    pub heartbeat_timeout_ms: u64,
    /// Longest time a shutdown (SIGTERM) may take, stopping the workloads
    /// if asked to included; then the agent exits anyway.
    #[arg(long, env = "ANKAGENT_SHUTDOWN_GRACE_MS", default_value_t = 20_000, value_name = "MS")]
    pub shutdown_grace_ms: u64,
    /// Stop and remove this node's workloads when the agent is stopped
    /// [default: they keep running and the next start takes them over].
    #[arg(long, env = "ANKAGENT_STOP_WORKLOADS_ON_SHUTDOWN", value_parser = clap::builder::BoolishValueParser::new())]
    pub stop_workloads_on_shutdown: bool,
    /// How long a workload that succeeded (and is not restarted) keeps its
    /// container (podman) or pod (podman-kube) before the agent removes it
    /// (its logs go with it); `never` (the default, as in Ankaios) keeps it.
    #[arg(long, env = "ANKAGENT_RETAIN_SUCCEEDED", default_value = "never", value_name = "DURATION",
          value_parser = crate::workload::retention::parse_retain_for)]
    pub retain_succeeded: crate::workload::retention::RetainFor,
    /// How long a workload that failed (non-zero exit, not restarted) keeps
    /// its container or pod before the agent removes it; `never` (the
    /// default, as in Ankaios) keeps it.
    #[arg(long, env = "ANKAGENT_RETAIN_FAILED", default_value = "never", value_name = "DURATION",
          value_parser = crate::workload::retention::parse_retain_for)]
    pub retain_failed: crate::workload::retention::RetainFor,
    /// Delay the restarts of every workload without its own
    /// `restartBackoff`: from INITIAL doubling up to MAX (5m when left
    /// out), with jitter, starting over after 10 minutes of running, e.g.
    /// `1s,5m`; `off` (the default, as in Ankaios) restarts at once.
    #[arg(long, env = "ANKAGENT_RESTART_BACKOFF", default_value = "off", value_name = "INITIAL[,MAX]",
          value_parser = crate::workload::crash_loop::parse_agent_backoff_flag)]
    pub restart_backoff: crate::workload::crash_loop::AgentBackoff,
    /// How often the podman runtime lists its containers (`podman ps --all`)
    /// to catch a state change its event sources missed.
    #[arg(long, env = "ANKAGENT_PODMAN_RECONCILE_INTERVAL", default_value = "30s", value_name = "DURATION",
          value_parser = ank_common::duration::parse_duration)]
    pub podman_reconcile_interval: std::time::Duration,
    /// containerd's socket (the `containerd` runtime).
    #[arg(long, env = "ANKAGENT_CONTAINERD_ADDRESS", default_value = crate::runtime_connectors::containerd::client::DEFAULT_ADDRESS,
          value_name = "PATH")]
    pub containerd_address: PathBuf,
    /// The containerd namespace of the `containerd` runtime's workloads
    /// (as nerdctl's: `ctr -n default containers ls` lists them).
    #[arg(long, env = "ANKAGENT_CONTAINERD_NAMESPACE", default_value = "default", value_name = "NAME")]
    pub containerd_namespace: String,
    /// containerd's snapshotter for the `containerd` runtime's workloads.
    #[arg(long, env = "ANKAGENT_CONTAINERD_SNAPSHOTTER", default_value = "overlayfs", value_name = "NAME")]
    pub containerd_snapshotter: String,
    /// Read podman's events from a long-running `podman events` child even
    /// where podman's event log can be read (tests of that fallback).
    #[arg(long, hide = true)]
    pub podman_events_child: bool,
    /// Do not start: ask the running agent of this name (same run folder)
    /// whether it is connected to its server; exit 0 if so, 1 if not.
    #[arg(long)]
    pub check: bool,
    /// TOML config file [default: /etc/ankaios/ank-agent.conf, if it exists].
    #[arg(short = 'x', long = "agent-config", value_name = "PATH")]
    pub agent_config: Option<PathBuf>,
    /// With mTLS: check the server's certificate against the host of the
    /// server URL instead of the name `ank-server` (Ankaios' rule).
    #[arg(long = "check-server-url-host", env = "ANKAGENT_CHECK_SERVER_URL_HOST",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub check_server_url_host: bool,
    /// The runtimes to offer, from the config file's `runtimes` (Ankaios);
    /// `None`: all of them.
    #[arg(skip)]
    pub runtimes: Option<Vec<String>>,
    /// Priority, quota and preemption of the workload scheduler.
    #[command(flatten)]
    pub scheduling: crate::scheduler_cli::SchedulerArgs,
}

/// A command line that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Name(#[from] ank_common::NameError),
    #[error("the agent needs a name: give --name (-n) or set 'name' in the config file")]
    MissingName,
    // [impl->swdd~agent-fails-on-missing-file-paths-and-insecure-cli-arguments~1]
    #[error("{}", .0.daemon_message())]
    MissingCertificates(tls::MissingCertificates),
    #[error("Failed to load certificate files!: '{0}'")]
    Tls(String),
    #[error("Invalid runtime configuration: '{0}'")]
    Runtimes(String),
    #[error("server url '{0}' uses http, but certificates were given; use an https:// url")]
    HttpWithTls(String),
    #[error("server url '{0}' must start with http:// or https://")]
    BadUrl(String),
}

/// A value of `--tag`, `--capability` or `--metric` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagValueError {
    #[error("tag '{0}' is not of the form key=value")]
    Tag(String),
    #[error("capability '{0}' must be one word")]
    Capability(String),
    #[error("metric '{0}' is not of the form name=number")]
    Metric(String),
}

fn parse_tag(s: &str) -> Result<(String, String), FlagValueError> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(FlagValueError::Tag(s.to_owned())),
    }
}

fn parse_capability(s: &str) -> Result<String, FlagValueError> {
    let c = s.trim();
    if c.is_empty() || c.chars().any(char::is_whitespace) {
        return Err(FlagValueError::Capability(s.to_owned()));
    }
    Ok(c.to_owned())
}

fn parse_metric(s: &str) -> Result<(String, f64), FlagValueError> {
    let bad = || FlagValueError::Metric(s.to_owned());
    let (name, value) = s.split_once('=').ok_or_else(bad)?;
    let value: f64 = value.trim().parse().map_err(|_| bad())?;
    if name.trim().is_empty() || !value.is_finite() {
        return Err(bad());
    }
    Ok((name.trim().to_owned(), value))
}

/// The default of `--max-parallel-creates`: two per CPU core, at least 2
/// and at most 10 (the default before it depended on the cores). On 2 cores,
/// 20 `podman run`s took 2.6 s with 4 at a time against 2.9 s with 10. The
/// cores are those the agent may use (std counts a cgroup CPU quota): on
/// half a core and 512 MiB, 40 creates took 15.6 s with 2 at a time, 16.4 s
/// with 1, 16.2 s with 4, 19.0 s with 8 and 18.3 s unlimited (docs/agent.md).
pub fn default_parallel_creates() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get().saturating_mul(2)).clamp(2, 10)
}

/// The `http://` URL an agent without TLS connects to for an `https://`
/// `url` (Ankaios replaces the scheme); `None` when nothing is replaced.
fn plain_url_for_insecure(url: &str, without_tls: bool) -> Option<String> {
    let rest = url.strip_prefix("https://").filter(|_| without_tls)?;
    Some(format!("http://{rest}"))
}

/// `$TMPDIR/ankaios`, or `/tmp/ankaios` without TMPDIR.
pub fn default_run_folder() -> PathBuf {
    ank_common::config_file::default_run_folder()
}

impl Cli {
    /// The health socket `--check` asks: `<run folder>/ank-agent-<name>.sock`.
    pub fn health_socket(&self) -> Result<PathBuf, CliError> {
        let name = self.name.as_deref().ok_or(CliError::MissingName)?;
        let name = ank_common::names::validate_agent_node_name(name)?;
        let folder = self.run_folder.clone().unwrap_or_else(default_run_folder);
        Ok(crate::health::socket_path(&folder, name.as_str()))
    }

    /// Ankaios' warning for `--insecure` given together with PEM items.
    pub fn tls_conflict(&self) -> Option<&'static str> {
        self.tls.conflict()
    }

    /// The warning for an `https://` server URL without TLS (`--insecure`):
    /// as Ankaios, the agent then connects with plain HTTP/2 to the same
    /// host and port (the `http://` URL the warning names).
    pub fn insecure_https_warning(&self) -> Option<String> {
        let url = self.server_url.as_deref()?;
        // With all three PEM items the agent uses mTLS even with
        // `--insecure` (after `tls_conflict`'s warning).
        let plain = plain_url_for_insecure(url, self.tls.insecure && !self.tls.pems_complete())?;
        Some(format!(
            "server url '{url}' uses https, but the agent runs without TLS (--insecure): connecting to '{plain}'"
        ))
    }

    /// Narrows `registry` to the config file's `runtimes`, if given;
    /// returns a warning for each runtime named there that this agent does
    /// not have, or an error when it has none of them.
    pub fn select_runtimes(&self, registry: &mut crate::RuntimeRegistry) -> Result<Vec<String>, CliError> {
        let Some(wanted) = &self.runtimes else { return Ok(Vec::new()) };
        let unsupported = registry.select(wanted).map_err(|e| CliError::Runtimes(e.to_string()))?;
        Ok(unsupported.iter().map(|r| format!("Configured runtime '{r}' is not supported.")).collect())
    }

    /// The runtimes of a production agent, set up as the flags say.
    pub fn runtimes(&self) -> crate::RuntimeRegistry {
        use crate::runtime_connectors::podman::{PodmanCli, PodmanRuntime};
        let mut podman = PodmanRuntime::new(PodmanCli::default());
        podman.reconcile_interval = self.podman_reconcile_interval;
        podman.events_child = self.podman_events_child;
        let mut registry = crate::RuntimeRegistry::with_podman_runtime(podman);
        // [feature issue 40: the containerd runtime on containerd's gRPC API]
        registry.register(std::sync::Arc::new(crate::runtime_connectors::containerd::ContainerdRuntime::new(
            self.containerd_settings(),
        )));
        registry
    }

    /// Where and how the `containerd` runtime works.
    pub fn containerd_settings(&self) -> crate::runtime_connectors::containerd::ContainerdSettings {
        let run_folder = self.run_folder.clone().unwrap_or_else(default_run_folder);
        crate::runtime_connectors::containerd::ContainerdSettings {
            address: self.containerd_address.clone(),
            namespace: self.containerd_namespace.clone(),
            snapshotter: self.containerd_snapshotter.clone(),
            state_dir: run_folder.join("containerd").join(&self.containerd_namespace),
            network_dir: crate::runtime_connectors::containerd::network_dir(&self.containerd_namespace),
            reconcile_interval: self.podman_reconcile_interval,
            stop_timeout: std::time::Duration::from_secs(10),
        }
    }

    /// Validates the flags into the library's configuration.
    // [impl->swdd~agent-supports-cli-argument-for-insecure-communication~1]
    pub fn into_config(self) -> Result<AgentConfig, CliError> {
        let name = self.name.as_deref().ok_or(CliError::MissingName)?;
        let name = ank_common::names::validate_agent_node_name(name)?;
        // [impl->swdd~agent-supports-pem-file-paths-as-cli-arguments~1]
        let tls = self.tls.sources().map_err(CliError::MissingCertificates)?;
        let default_url = if tls.is_some() { DEFAULT_SERVER_URL } else { DEFAULT_INSECURE_SERVER_URL };
        let mut server_url = self.server_url.unwrap_or_else(|| default_url.to_owned());
        // Ankaios without TLS connects to an https:// URL with plain HTTP/2
        // (main logs `insecure_https_warning`).
        if let Some(plain) = plain_url_for_insecure(&server_url, tls.is_none()) {
            server_url = plain;
        }
        match (server_url.split_once("://").map(|(scheme, _)| scheme), tls.is_some()) {
            (Some("http"), false) | (Some("https"), true) => {}
            (Some("http"), true) => return Err(CliError::HttpWithTls(server_url)),
            _ => return Err(CliError::BadUrl(server_url)),
        }
        if let Some(sources) = &tls {
            // Checked now so that a wrong file stops the start; read again at every connect.
            sources.load().map_err(|e| CliError::Tls(e.to_string()))?;
        }
        let mut config = AgentConfig::new(name.as_str(), server_url);
        if let (Some(crl), true) = (&self.tls.crl_pem, tls.is_some()) {
            // Checked now so that a wrong file stops the start; read again at every connect.
            let pem = std::fs::read(crl).map_err(|e| CliError::Tls(format!("crl_pem '{}': {e}", crl.display())))?;
            ank_common::tls::revocation_lists(&pem)
                .map_err(|e| CliError::Tls(format!("crl_pem '{}': {e}", crl.display())))?;
        }
        config.tls_crl = self.tls.crl_pem.filter(|_| tls.is_some());
        config.tls = tls;
        config.tls_check_url_host = self.check_server_url_host;
        config.heartbeat =
            ank_proto::dial::Heartbeat::from_millis(self.heartbeat_interval_ms, self.heartbeat_timeout_ms);
        config.run_folder = self.run_folder.unwrap_or_else(default_run_folder);
        config.tags = self.tags.into_iter().collect::<BTreeMap<_, _>>();
        config.capabilities = self.capabilities;
        config.metrics = self.metrics.into_iter().collect();
        config.shutdown_grace = std::time::Duration::from_millis(self.shutdown_grace_ms);
        config.stop_workloads_on_shutdown = self.stop_workloads_on_shutdown;
        config.max_parallel_creates = self.max_parallel_creates.max(1);
        config.scheduler = self.scheduling.settings();
        config.retry_policy = crate::RetryPolicy::from_flags(self.create_retries, self.create_retry_interval_ms);
        // [feature K7: retention per terminal state, from flag, env, config file or default (never)]
        config.retention = crate::Retention { succeeded: self.retain_succeeded, failed: self.retain_failed };
        // [feature issue 39: the agent's crash-loop delays, from flag, env, config file or default (off)]
        config.restart_backoff = self.restart_backoff.0;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<AgentConfig, CliError> {
        let mut all = vec!["ank-agent"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap().into_config()
    }

    #[test]
    // [utest->swdd~agent-supports-cli-argument-for-insecure-communication~1]
    // [utest->swdd~agent-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1]
    fn cli_insecure_defaults_to_plain_http_url() {
        let c = parse(&["-n", "agent_A", "-k", "-t", "gpu=yes", "--tag", "zone=a=b", "-r", "/x"]).unwrap();
        assert_eq!(c.name, "agent_A");
        assert_eq!(c.server_url, DEFAULT_INSECURE_SERVER_URL);
        assert_eq!(c.run_folder, PathBuf::from("/x"));
        assert_eq!(c.tags.get("gpu").map(String::as_str), Some("yes"));
        assert_eq!(c.tags.get("zone").map(String::as_str), Some("a=b"));
    }

    // [test of feature S1: agents advertise labels, capabilities and metrics]
    #[test]
    fn cli_labels_capabilities_and_metrics() {
        let c = parse(&[
            "-n",
            "a",
            "-k",
            "--label",
            "arch=arm64",
            "-t",
            "ecu=hpc1",
            "--capability",
            "gpu",
            "--capability",
            "/dev/dri",
            "--metric",
            "speed=2.5",
        ])
        .unwrap();
        assert_eq!(c.tags.get("arch").map(String::as_str), Some("arm64"));
        assert_eq!(c.tags.len(), 2);
        assert_eq!(c.capabilities, ["gpu", "/dev/dri"]);
        assert_eq!(c.metrics.get("speed"), Some(&2.5));
        assert!(Cli::try_parse_from(["ank-agent", "--metric", "speed=fast"]).is_err());
        assert!(Cli::try_parse_from(["ank-agent", "--metric", "speed"]).is_err());
        assert!(Cli::try_parse_from(["ank-agent", "--capability", "a b"]).is_err());
    }

    #[test]
    fn cli_sets_the_create_retry_limits() {
        let c = parse(&["-n", "a", "-k", "--create-retries", "3", "--create-retry-interval-ms", "250"]).unwrap();
        assert_eq!(c.retry_policy, crate::RetryPolicy::limited(3, std::time::Duration::from_millis(250)));
        let c = parse(&["-n", "a", "-k", "--create-retries", "20"]).unwrap();
        assert_eq!(c.retry_policy, crate::RetryPolicy::limited(20, std::time::Duration::from_secs(1)));
        let c = parse(&["-n", "a", "-k"]).unwrap();
        assert_eq!(c.retry_policy, crate::RetryPolicy::default(), "Ankaios' backoff without limit");
        assert!(matches!(c.retry_policy, crate::RetryPolicy::Backoff { .. }));
    }

    #[test]
    // [test of feature K7]
    fn cli_sets_the_retention_per_terminal_state() {
        use crate::workload::retention::RetainFor;
        let c = parse(&["-n", "a", "-k"]).unwrap();
        assert_eq!(c.retention, crate::Retention::default());
        assert_eq!((c.retention.succeeded, c.retention.failed), (RetainFor::Never, RetainFor::Never), "as Ankaios");
        let c = parse(&["-n", "a", "-k", "--retain-succeeded", "5s", "--retain-failed", "2d"]).unwrap();
        assert_eq!(c.retention.succeeded, RetainFor::After(std::time::Duration::from_secs(5)));
        assert_eq!(c.retention.failed, RetainFor::After(std::time::Duration::from_secs(2 * 86_400)));
        let c = parse(&["-n", "a", "-k", "--retain-succeeded", "1m", "--retain-failed", "never"]).unwrap();
        assert_eq!(c.retention.failed, RetainFor::Never);
        let e = Cli::try_parse_from(["ank-agent", "-n", "a", "--retain-failed", "3 parsecs"]).unwrap_err().to_string();
        assert!(e.contains("--retain-failed") && e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn cli_sets_the_restart_backoff_of_workloads_without_their_own() {
        let c = parse(&["-n", "a", "-k"]).unwrap();
        assert_eq!(c.restart_backoff, None, "off by default: restarts at once, as in Ankaios");
        let c = parse(&["-n", "a", "-k", "--restart-backoff", "2s,1m"]).unwrap();
        let s = c.restart_backoff.unwrap();
        assert_eq!(
            (s.initial_delay, s.max_delay),
            (std::time::Duration::from_secs(2), std::time::Duration::from_secs(60))
        );
        assert_eq!((s.attempts, s.reset_after), (None, std::time::Duration::from_secs(600)));
        assert_eq!(parse(&["-n", "a", "-k", "--restart-backoff", "off"]).unwrap().restart_backoff, None);
        let e = Cli::try_parse_from(["ank-agent", "--restart-backoff", "1m,1s"]).unwrap_err().to_string();
        assert!(e.contains("--restart-backoff") && e.contains("shorter"), "{e}");
    }

    #[test]
    fn cli_sets_the_podman_reconcile_interval() {
        let cli = Cli::try_parse_from(["ank-agent", "-n", "a", "-k"]).unwrap();
        assert_eq!(cli.podman_reconcile_interval, crate::runtime_connectors::podman::DEFAULT_RECONCILE_INTERVAL);
        let cli = Cli::try_parse_from(["ank-agent", "-n", "a", "--podman-reconcile-interval", "1h"]).unwrap();
        assert_eq!(cli.podman_reconcile_interval, std::time::Duration::from_secs(3600));
        assert!(cli.runtimes().get("podman").is_some());
    }

    #[test]
    // [utest->swdd~agent-fails-on-missing-file-paths-and-insecure-cli-arguments~1]
    fn cli_without_certificates_or_insecure_fails_with_ankaios_message() {
        let e = parse(&["-n", "a"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "Missing certificate files: 'Either provide mTLS config via the '--ca_pem \"\"', '--crt_pem \"\"' and \
             '--key_pem \"\"' options or deactivate mTLS with the '--insecure' option!'"
        );
        let e = parse(&["-n", "a", "-k", "--ca_pem", "/nope/ca.pem"]).unwrap_err().to_string();
        assert!(e.contains("'--ca_pem /nope/ca.pem', '--crt_pem \"\"'"), "{e}");
        let cli =
            Cli::try_parse_from(["ank-agent", "-k", "--ca_pem", "a", "--crt_pem", "b", "--key_pem", "c"]).unwrap();
        assert_eq!(cli.tls_conflict(), Some(ank_common::tls::INSECURE_AND_SECURE));
    }

    #[test]
    fn cli_runtimes_of_the_config_file_narrow_the_registry() {
        use crate::runtime_connectors::fake::FakeRuntime;
        let registry = || {
            let mut r = crate::RuntimeRegistry::new();
            r.register(std::sync::Arc::new(FakeRuntime::named("podman")));
            r.register(std::sync::Arc::new(FakeRuntime::named("podman-kube")));
            r
        };
        let mut cli = Cli::try_parse_from(["ank-agent", "-n", "a", "-k"]).unwrap();
        let mut all = registry();
        assert_eq!(cli.select_runtimes(&mut all), Ok(vec![]));
        assert_eq!(all.iter().count(), 2, "no runtimes key: all of them");
        cli.runtimes = Some(vec!["podman".into(), "containerd".into()]);
        let mut some = registry();
        assert_eq!(
            cli.select_runtimes(&mut some),
            Ok(vec!["Configured runtime 'containerd' is not supported.".into()])
        );
        assert!(some.get("podman").is_some() && some.get("podman-kube").is_none());
        cli.runtimes = Some(vec!["containerd".into()]);
        assert_eq!(
            cli.select_runtimes(&mut registry()).unwrap_err().to_string(),
            "Invalid runtime configuration: 'No valid runtimes configured. Supported runtimes: [\"podman\", \"podman-kube\"]'"
        );
    }

    #[test]
    fn cli_reports_the_ankaios_version_and_checks_the_server_host_only_on_request() {
        let version = Cli::command().render_version();
        assert_eq!(version.split(' ').nth(1), Some(ank_common::version::ANKAIOS_VERSION), "{version}");
        assert!(!parse(&["-n", "a", "-k"]).unwrap().tls_check_url_host, "Ankaios checks the name ank-server");
        assert!(parse(&["-n", "a", "-k", "--check-server-url-host"]).unwrap().tls_check_url_host);
    }

    #[test]
    // [utest->swdd~agent-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1]
    fn cli_insecure_with_an_https_url_warns_and_connects_with_plain_http_as_ankaios() {
        let argv = ["ank-agent", "-n", "a", "-k", "-s", "https://h:25551"];
        let cli = Cli::try_parse_from(argv).unwrap();
        assert_eq!(
            cli.insecure_https_warning().as_deref(),
            Some(
                "server url 'https://h:25551' uses https, but the agent runs without TLS (--insecure): \
                 connecting to 'http://h:25551'"
            )
        );
        let c = cli.into_config().expect("Ankaios starts: so does ours");
        assert_eq!(c.server_url, "http://h:25551");
        assert!(c.tls.is_none());
        // Nothing to warn about: plain http, or mTLS with all three PEM items.
        assert_eq!(
            Cli::try_parse_from(["ank-agent", "-n", "a", "-k", "-s", "http://h:1"]).unwrap().insecure_https_warning(),
            None
        );
        let pems =
            ["ank-agent", "-n", "a", "-k", "-s", "https://h:1", "--ca_pem", "c", "--crt_pem", "d", "--key_pem", "e"];
        assert_eq!(Cli::try_parse_from(pems).unwrap().insecure_https_warning(), None);
    }

    #[test]
    // [utest->swdd~agent-supports-pem-file-paths-as-cli-arguments~1]
    fn cli_refuses_tls_with_http() {
        let pems = ["-n", "a", "--ca_pem", "/nope/ca.pem", "--crt_pem", "/nope/c.pem", "--key_pem", "/nope/k.pem"];
        let e = parse(&pems).unwrap_err().to_string();
        assert!(e.starts_with("Failed to load certificate files!: 'cannot read ca_pem file '/nope/ca.pem'"), "{e}");
        let mut http = pems.to_vec();
        http.extend(["-s", "http://h:1"]);
        assert_eq!(parse(&http).unwrap_err(), CliError::HttpWithTls("http://h:1".into()));
        assert!(parse(&["-n", "a", "-k", "-s", "ftp://h"]).is_err());
        assert!(parse(&["-n", "a.b", "-k"]).unwrap_err().to_string().contains("a.b"));
        assert!(Cli::try_parse_from(["ank-agent", "-n", "a", "-t", "novalue"]).is_err());
        assert_eq!(parse(&["-k"]).unwrap_err(), CliError::MissingName);
    }
}
