//! Command line of `ank-server`, with the flags and environment variables of
//! Ankaios' server.

use std::net::SocketAddr;
use std::path::PathBuf;

use ank_common::tls::{self, TlsSources};
use ank_common::tls_flags::{TlsArgs, TlsFlavor};
use clap::Parser;

use crate::placement::config as placement;

/// The server's names and help texts of the shared connection flags.
#[derive(Debug, Clone, Default)]
pub struct ServerTls;

impl TlsFlavor for ServerTls {
    const INSECURE_ENV: &'static str = "ANKSERVER_INSECURE";
    const CA_PEM_ENV: &'static str = "ANKSERVER_CA_PEM";
    const CRT_PEM_ENV: &'static str = "ANKSERVER_CRT_PEM";
    const KEY_PEM_ENV: &'static str = "ANKSERVER_KEY_PEM";
    const CRL_PEM_ENV: &'static str = "ANKSERVER_CRL_PEM";
    const INSECURE_HELP: &'static str = "Serve without TLS";
    const CA_PEM_HELP: &'static str = "CA certificate (PEM) for mTLS";
    const CRT_PEM_HELP: &'static str = "Server certificate (PEM) for mTLS";
    const KEY_PEM_HELP: &'static str = "Server key (PEM) for mTLS";
    const CRL_PEM_HELP: &'static str = "With mTLS: a PEM file of certificate revocation lists of the CA; a client \
                                        certificate they revoke is refused (re-read on SIGHUP)";
    const GLOBAL: bool = false;
    fn bool_parser() -> clap::builder::ValueParser {
        clap::builder::ValueParser::bool()
    }
}

/// The Ankaios-compatible server.
#[derive(Debug, Parser)]
#[command(name = "ank-server", version = ank_common::version::VERSION_LINE, about = "Holds the desired state and serves agents and the ank CLI")]
pub struct Args {
    /// Manifest loaded as the initial desired state.
    #[arg(
        short = 'm',
        short_alias = 'c',
        long = "startup-manifest",
        visible_alias = "startup-config",
        value_name = "PATH"
    )]
    pub startup_manifest: Option<PathBuf>,
    /// Refuse a startup manifest with unknown fields (by default they are
    /// ignored with a warning, as Ankaios ignores them)
    #[arg(long = "strict-manifest", env = "ANKSERVER_STRICT_MANIFEST")]
    pub strict_manifest: bool,
    /// File that keeps the desired state across restarts: loaded at start
    /// when it exists (the startup manifest is then not used), rewritten
    /// atomically after every accepted change.
    #[arg(long = "state-file", env = "ANKSERVER_STATE_FILE", value_name = "PATH")]
    pub state_file: Option<PathBuf>,
    /// Folder of the health socket `--check` asks (ank-server.sock)
    /// [default: $TMPDIR/ankaios or /tmp/ankaios].
    #[arg(long = "run-folder", env = "ANKSERVER_RUN_FOLDER", value_name = "PATH")]
    pub run_folder: Option<PathBuf>,
    /// Longest time a shutdown (SIGTERM) may take; open streams are closed
    /// after it.
    #[arg(long = "shutdown-grace-ms", env = "ANKSERVER_SHUTDOWN_GRACE_MS", default_value_t = 5000, value_name = "MS")]
    pub shutdown_grace_ms: u64,
    /// Do not start: ask the running server (same run folder) whether it
    /// serves; exit 0 if so, 1 if not.
    #[arg(long = "check")]
    pub check: bool,
    /// Address to listen on, with port.
    #[arg(short = 'a', long = "address", default_value = "127.0.0.1:25551", value_name = "ADDR")]
    pub address: SocketAddr,
    /// `-k, --insecure` and the mTLS items (`--ca_pem`, `--crt_pem`,
    /// `--key_pem`, `--crl_pem`), with the `ANKSERVER_*` variables.
    #[command(flatten)]
    pub tls: TlsArgs<ServerTls>,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
    /// TOML config file [default: /etc/ankaios/ank-server.conf, if it exists].
    #[arg(short = 'x', long = "server-config", value_name = "PATH")]
    pub server_config: Option<PathBuf>,
    /// With mTLS: accept agents whatever names their certificate carries.
    #[arg(long = "allow-any-agent-name", env = "ANKSERVER_ALLOW_ANY_AGENT_NAME")]
    pub allow_any_agent_name: bool,
    /// With mTLS: an agent's certificate must carry the agent's name itself
    /// as CN or SAN DNS name; a SAN of `*` admits no agent [default: as
    /// Ankaios, a SAN DNS name equal to the name or `*`].
    #[arg(long = "strict-agent-names", env = "ANKSERVER_STRICT_AGENT_NAMES")]
    pub strict_agent_names: bool,
    /// With mTLS: clients whose certificate carries this name (CN or SAN)
    /// may only read the state (repeatable; env: comma-separated).
    #[arg(long = "read-only-client", env = "ANKSERVER_READ_ONLY_CLIENTS", value_delimiter = ',', value_name = "NAME")]
    pub read_only_clients: Vec<String>,
    /// With mTLS, switches roles on: only clients whose certificate carries
    /// one of these names (CN or SAN), or a --read-only-client name, may be
    /// commanders (ank, SDKs), and they may not be agents; every other
    /// certificate may only be an agent (repeatable; env: comma-separated)
    /// [default: roles off, any client certificate may be either, as Ankaios].
    #[arg(long = "commander-client", env = "ANKSERVER_COMMANDER_CLIENTS", value_delimiter = ',', value_name = "NAME")]
    pub commander_clients: Vec<String>,
    /// Most event subscriptions one connection may keep open (a workload's
    /// travel on its agent's connection); one more is refused.
    #[arg(
        long = "max-subscriptions-per-connection",
        env = "ANKSERVER_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = crate::stream_limits::DEFAULT_PER_CONNECTION,
        value_name = "N"
    )]
    pub max_subscriptions_per_connection: usize,
    /// Most log requests one connection may keep open; one more is refused.
    #[arg(
        long = "max-log-requests-per-connection",
        env = "ANKSERVER_MAX_LOG_REQUESTS_PER_CONNECTION",
        default_value_t = crate::stream_limits::DEFAULT_PER_CONNECTION,
        value_name = "N"
    )]
    pub max_log_requests_per_connection: usize,
    /// Milliseconds between two heartbeats (HTTP/2 PINGs) to each agent and client; 0: none.
    #[arg(
        long = "heartbeat-interval-ms",
        env = "ANKSERVER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 1000,
        value_name = "MS"
    )]
    pub heartbeat_interval_ms: u64,
    /// Milliseconds a heartbeat may go unanswered before the peer counts as gone
    /// (an agent becomes AgentDisconnected).
    #[arg(
        long = "heartbeat-timeout-ms",
        env = "ANKSERVER_HEARTBEAT_TIMEOUT_MS",
        default_value_t = 2000,
        value_name = "MS"
    )]
    pub heartbeat_timeout_ms: u64,
    /// Seconds after the last report confirming a Ready workload at which
    /// the server re-sends its spec to the agent.
    #[arg(long = "resync-ready-s", env = "ANKSERVER_RESYNC_READY_S", default_value_t = 1800, value_name = "S")]
    pub resync_ready_s: u64,
    /// The same for a workload that is not Ready (lost messages heal
    /// within this time).
    #[arg(long = "resync-not-ready-s", env = "ANKSERVER_RESYNC_NOT_READY_S", default_value_t = 10, value_name = "S")]
    pub resync_not_ready_s: u64,
    /// Seconds an apply job may wait with nothing running and nothing it
    /// can start before it fails as stuck (extension, opt-in) [default: no
    /// limit; a job waits for a late agent as long as it takes].
    #[arg(long = "job-stuck-after-s", env = "ANKSERVER_JOB_STUCK_AFTER_S", value_name = "S")]
    pub job_stuck_after_s: Option<u64>,
    /// Hold a workload back at the server until its dependencies meet their
    /// add conditions, and a deletion until the deleted dependents are gone
    /// (extension, opt-in) [default: as Ankaios, every workload goes to its
    /// agent at once and the agent waits for the dependencies].
    #[arg(long = "hold-dependents", env = "ANKSERVER_HOLD_DEPENDENTS")]
    pub hold_dependents: bool,
    /// With --hold-dependents: once an item of an apply job failed, hand
    /// out nothing more the job holds (extension, opt-in).
    #[arg(long = "job-stop-on-failure", env = "ANKSERVER_JOB_STOP_ON_FAILURE")]
    pub job_stop_on_failure: bool,
    /// How many finished apply jobs the server keeps (`ank get jobs`).
    #[arg(long = "job-history", env = "ANKSERVER_JOB_HISTORY", default_value_t = 100, value_name = "N")]
    pub job_history: usize,
    /// Show an apply job's progress ("job 14: waits for db ...") as the
    /// additionalInfo of the workloads it holds back (extension; Ankaios
    /// shows them without).
    #[arg(long = "job-progress-in-states", env = "ANKSERVER_JOB_PROGRESS_IN_STATES")]
    pub job_progress_in_states: bool,
    /// How long a finished workload without its own ttlAfterFinished stays
    /// in the desired state, e.g. 1h or 2d [default: forever (the reaper is off)].
    #[arg(
        long = "ttl-after-finished",
        env = "ANKSERVER_TTL_AFTER_FINISHED",
        value_name = "DURATION",
        value_parser = ank_common::duration::parse_duration
    )]
    pub ttl_after_finished: Option<std::time::Duration>,
    /// Milliseconds between two checks for finished workloads whose
    /// ttlAfterFinished ran out.
    #[arg(long = "reaper-tick-ms", env = "ANKSERVER_REAPER_TICK_MS", default_value_t = 1000, value_name = "MS")]
    pub reaper_tick_ms: u64,
    /// Weight of the bonus the agent a selector workload runs on gets when
    /// placement looks at it again (Krake's stickiness).
    #[arg(
        long = "scheduler-stickiness",
        env = "ANKSERVER_SCHEDULER_STICKINESS",
        default_value = "0.1",
        value_parser = placement::parse_stickiness,
        value_name = "WEIGHT"
    )]
    pub scheduler_stickiness: f64,
    /// Period of the rebalance pass of `migration: rebalance` workloads
    /// (60s, 2m, ...).
    #[arg(
        long = "scheduler-reschedule-after",
        env = "ANKSERVER_SCHEDULER_RESCHEDULE_AFTER",
        default_value = "60s",
        value_parser = placement::parse_interval,
        value_name = "DURATION"
    )]
    pub scheduler_reschedule_after: std::time::Duration,
    /// How long an agent must stay disconnected before its selector
    /// workloads move to another agent (`migration: onAgentLoss`, `rebalance`).
    #[arg(
        long = "scheduler-agent-loss-grace",
        env = "ANKSERVER_SCHEDULER_AGENT_LOSS_GRACE",
        default_value = "5m",
        value_parser = placement::parse_interval,
        value_name = "DURATION"
    )]
    pub scheduler_agent_loss_grace: std::time::Duration,
    /// Seed of the placement tie-break, for reproducible placements
    /// [default: from the clock].
    #[arg(long = "scheduler-seed", env = "ANKSERVER_SCHEDULER_SEED", value_name = "N")]
    pub scheduler_seed: Option<u64>,
    /// Range of a metric that ranking normalizes to 0..1: NAME=MIN:MAX, or
    /// NAME=MIN:MAX:lower when lower values are better (repeatable; env:
    /// comma-separated). Built in: cpu_usage=0:100:lower, free_memory_mb=0:65536.
    #[arg(
        long = "metric-range",
        env = "ANKSERVER_METRIC_RANGES",
        value_delimiter = ',',
        value_parser = placement::parse_metric_range,
        value_name = "NAME=MIN:MAX[:lower]"
    )]
    pub metric_ranges: Vec<(String, crate::placement::MetricRange)>,
    /// The `[[mutating_hooks]]` of the config file (no flag sets them),
    /// with the defaults of the keys they leave out.
    #[arg(skip)]
    pub mutating_hooks: Vec<crate::hooks::HookConfig>,
}

impl Args {
    /// The mTLS set-up, `None` with `--insecure`; refused (as Ankaios
    /// does) unless all three PEM items or `--insecure` alone are given.
    pub fn tls_sources(&self) -> Result<Option<TlsSources>, tls::MissingCertificates> {
        self.tls.sources()
    }

    /// Ankaios' warning for `--insecure` given together with PEM items.
    pub fn tls_conflict(&self) -> Option<&'static str> {
        self.tls.conflict()
    }

    /// How agent names are checked against their certificates.
    pub fn identity_policy(&self) -> crate::grpc::identity::IdentityPolicy {
        use crate::grpc::identity::AgentNameRule;
        let agent_names = match (self.allow_any_agent_name, self.strict_agent_names) {
            (true, _) => AgentNameRule::Any,
            (false, true) => AgentNameRule::Strict,
            (false, false) => AgentNameRule::San,
        };
        crate::grpc::identity::IdentityPolicy {
            agent_names,
            read_only_clients: self.read_only_clients.clone(),
            commander_clients: self.commander_clients.clone(),
        }
    }

    /// How many event subscriptions and log requests one connection may keep open.
    pub fn stream_limits(&self) -> crate::stream_limits::StreamLimits {
        crate::stream_limits::StreamLimits {
            event_subscriptions: self.max_subscriptions_per_connection,
            log_requests: self.max_log_requests_per_connection,
        }
    }

    /// The heartbeat settings; `None` when switched off (interval 0).
    pub fn heartbeat(&self) -> Option<ank_proto::dial::Heartbeat> {
        ank_proto::dial::Heartbeat::from_millis(self.heartbeat_interval_ms, self.heartbeat_timeout_ms)
    }

    /// When unconfirmed specs are re-sent.
    pub fn resync(&self) -> crate::workload_states::ResyncSettings {
        crate::workload_states::ResyncSettings {
            ready: std::time::Duration::from_secs(self.resync_ready_s.max(1)),
            not_ready: std::time::Duration::from_secs(self.resync_not_ready_s.max(1)),
        }
    }

    /// How apply jobs behave.
    pub fn jobs(&self) -> crate::jobs::JobSettings {
        crate::jobs::JobSettings {
            stuck_after: self.job_stuck_after_s.map(|s| std::time::Duration::from_secs(s.max(1))),
            hold_dependents: self.hold_dependents,
            stop_on_failure: self.job_stop_on_failure,
            history: self.job_history,
            progress_in_states: self.job_progress_in_states,
        }
    }

    /// When finished workloads are deleted.
    pub fn reaper(&self) -> crate::reaper::ReaperSettings {
        crate::reaper::ReaperSettings {
            tick: std::time::Duration::from_millis(self.reaper_tick_ms.max(10)),
            default_ttl: self.ttl_after_finished,
        }
    }

    /// The mutating hooks of the config file.
    pub fn hooks(&self) -> Vec<crate::hooks::HookConfig> {
        self.mutating_hooks.clone()
    }

    /// How workloads with an agent selector are placed.
    pub fn placement(&self) -> crate::placement::PlacementSettings {
        placement::settings(
            self.scheduler_stickiness,
            self.scheduler_reschedule_after,
            self.scheduler_agent_loss_grace,
            self.scheduler_seed,
            &self.metric_ranges,
        )
    }

    /// The health socket of this server.
    pub fn health_socket(&self) -> PathBuf {
        let folder = self.run_folder.clone().unwrap_or_else(ank_common::config_file::default_run_folder);
        crate::health::socket_path(&folder)
    }

    /// Checks combinations clap cannot express.
    pub fn validate(&self) -> Result<(), String> {
        self.tls_sources().map(|_| ()).map_err(|e| e.daemon_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_defaults_and_insecure_requirement() {
        let a = Args::try_parse_from(["ank-server"]).unwrap();
        assert_eq!(a.address.to_string(), "127.0.0.1:25551");
        assert_eq!(
            a.validate().unwrap_err(),
            "Missing certificate files: 'Either provide mTLS config via the '--ca_pem \"\"', '--crt_pem \"\"' and \
             '--key_pem \"\"' options or deactivate mTLS with the '--insecure' option!'"
        );
        let a = Args::try_parse_from(["ank-server", "--ca_pem", "ca.pem", "--crt_pem", "s.pem", "--key_pem", "k.pem"])
            .unwrap();
        assert!(a.tls_sources().unwrap().is_some());
        let a = Args::try_parse_from(["ank-server", "-k", "-a", "0.0.0.0:1", "-m", "x.yaml"]).unwrap();
        assert!(a.validate().is_ok());
        assert_eq!(a.startup_manifest.unwrap().to_str(), Some("x.yaml"));
    }

    #[test]
    fn cli_takes_ankaios_flags_and_reports_the_ankaios_version() {
        let a = Args::try_parse_from(["ank-server", "-k", "-c", "/m.yaml"]).unwrap();
        assert_eq!(a.startup_manifest, Some(PathBuf::from("/m.yaml")), "-c is Ankaios' short flag");
        let a = Args::try_parse_from(["ank-server", "-k", "--startup-config", "/n.yaml"]).unwrap();
        assert_eq!(a.startup_manifest, Some(PathBuf::from("/n.yaml")));
        let version = Args::command().render_version();
        assert_eq!(version.split(' ').nth(1), Some(ank_common::version::ANKAIOS_VERSION), "{version}");
        assert_eq!(version.trim_end(), format!("ank-server 1.1.0-pre (ank {})", env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn cli_agent_name_rule_by_flag() {
        use crate::grpc::identity::AgentNameRule;
        let rule = |argv: &[&str]| {
            let all: Vec<&str> = ["ank-server", "-k"].iter().chain(argv).copied().collect();
            Args::try_parse_from(all).unwrap().identity_policy().agent_names
        };
        assert_eq!(rule(&[]), AgentNameRule::San, "Ankaios' rule by default");
        assert_eq!(rule(&["--strict-agent-names"]), AgentNameRule::Strict);
        assert_eq!(rule(&["--allow-any-agent-name"]), AgentNameRule::Any);
        assert_eq!(rule(&["--allow-any-agent-name", "--strict-agent-names"]), AgentNameRule::Any);
    }

    #[test]
    fn cli_placement_defaults_and_flags() {
        let d = Args::try_parse_from(["ank-server", "-k"]).unwrap().placement();
        assert_eq!((d.stickiness, d.reschedule_after.as_secs(), d.agent_loss_grace.as_secs()), (0.1, 60, 300));
        let a = Args::try_parse_from([
            "ank-server",
            "--scheduler-stickiness",
            "0.3",
            "--scheduler-reschedule-after",
            "10s",
            "--scheduler-agent-loss-grace",
            "1m",
            "--scheduler-seed",
            "42",
            "--metric-range",
            "free_memory_mb=0:8192",
            "--metric-range",
            "temp=20:90:lower",
        ])
        .unwrap();
        let p = a.placement();
        assert_eq!((p.stickiness, p.reschedule_after.as_secs(), p.agent_loss_grace.as_secs()), (0.3, 10, 60));
        assert_eq!((p.seed, p.metrics["free_memory_mb"].max, p.metrics["temp"].higher_is_better), (42, 8192.0, false));
        assert!(Args::try_parse_from(["ank-server", "--scheduler-stickiness", "-2"]).is_err());
        assert!(Args::try_parse_from(["ank-server", "--metric-range", "x=1:0"]).is_err());
    }
}
