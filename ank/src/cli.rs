//! The command line of `ank` (clap derive), compatible with Eclipse Ankaios'
//! `ank`: global connection options, the `get`, `delete`, `run` and `apply`
//! verbs, and the resolution of the server URL from `--server-url` and
//! `--insecure`.

use std::time::Duration;

use ank_common::tls::{self, TlsSources};
use ank_common::tls_flags::{TlsArgs, TlsFlavor};
use clap::builder::FalseyValueParser;
use clap::{Args, Parser, Subcommand, ValueEnum};

mod get;
pub use get::*;

/// Server URL used when none is given and TLS is on.
pub const DEFAULT_SERVER_URL: &str = "https://127.0.0.1:25551";
/// Server URL used when none is given and `--insecure` is set.
pub const DEFAULT_INSECURE_SERVER_URL: &str = "http://127.0.0.1:25551";

/// `ank`'s names and help texts of the shared connection flags.
#[derive(Debug, Clone, Default)]
pub struct AnkTls;

impl TlsFlavor for AnkTls {
    const INSECURE_ENV: &'static str = "ANK_INSECURE";
    const CA_PEM_ENV: &'static str = "ANK_CA_PEM";
    const CRT_PEM_ENV: &'static str = "ANK_CRT_PEM";
    const KEY_PEM_ENV: &'static str = "ANK_KEY_PEM";
    const CRL_PEM_ENV: &'static str = "ANK_CRL_PEM";
    const INSECURE_HELP: &'static str = "Connect without TLS (otherwise --ca_pem, --crt_pem and --key_pem are needed)";
    const CA_PEM_HELP: &'static str = "CA certificate (PEM) for mTLS";
    const CRT_PEM_HELP: &'static str = "Client certificate (PEM) for mTLS";
    const KEY_PEM_HELP: &'static str = "Client key (PEM) for mTLS";
    const CRL_PEM_HELP: &'static str =
        "With mTLS: a PEM file of certificate revocation lists of the CA; a server certificate they revoke is refused";
    const GLOBAL: bool = true;
    fn bool_parser() -> clap::builder::ValueParser {
        FalseyValueParser::new().into()
    }
}

/// Parsed command line of `ank`.
#[derive(Debug, Parser)]
#[command(name = "ank", version = ank_common::version::VERSION_LINE, about = "Command line interface of the Ankaios-compatible orchestrator")]
pub struct Cli {
    /// URL of the server [default: https://127.0.0.1:25551, or http:// with --insecure]
    #[arg(short = 's', long = "server-url", env = "ANK_SERVER_URL")]
    pub server_url: Option<String>,

    /// `-k, --insecure` and the mTLS items (`--ca_pem`, `--crt_pem`,
    /// `--key_pem`, `--crl_pem`), with the `ANK_*` variables.
    #[command(flatten)]
    pub tls: TlsArgs<AnkTls>,

    /// Do not wait until the workloads of apply, run or delete reached their states
    #[arg(long = "no-wait", env = "ANK_NO_WAIT", global = true, value_parser = FalseyValueParser::new())]
    pub no_wait: bool,

    /// Wait until the job of apply, run, delete or set is over and exit 1 if it failed
    // `--no-wait` excludes it: see `crate::config_file::resolve_wait`.
    #[arg(long = "wait", env = "ANK_WAIT", global = true, value_parser = FalseyValueParser::new())]
    pub wait_job: bool,

    /// How long to wait for each response of the server, in milliseconds
    #[arg(
        long = "response-timeout",
        env = "ANK_RESPONSE_TIMEOUT",
        value_name = "MS",
        default_value_t = 3000,
        global = true
    )]
    pub response_timeout_ms: u64,

    /// Print the job id, what mutating hooks changed and the names a command skips to stderr
    /// (ANK_TRACE_MESSAGES=1: also every message sent and received)
    #[arg(short = 'v', long = "verbose", env = "ANK_VERBOSE", global = true, value_parser = FalseyValueParser::new())]
    pub verbose: bool,

    /// Print only requested data and errors
    #[arg(short = 'q', long = "quiet", env = "ANK_QUIET", global = true, value_parser = FalseyValueParser::new())]
    pub quiet: bool,

    /// With mTLS: check the server's certificate against the host of the
    /// server URL instead of the name `ank-server` (Ankaios' rule)
    #[arg(long = "check-server-url-host", env = "ANK_CHECK_SERVER_URL_HOST", global = true, value_parser = FalseyValueParser::new())]
    pub check_server_url_host: bool,

    /// TOML config file [default: $HOME/.config/ankaios/ank.conf, then /etc/ankaios/ank.conf, the first that exists]
    #[arg(short = 'x', long = "ank-config", value_name = "PATH", global = true)]
    pub ank_config: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// The verbs of `ank`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the state, workloads, agents or configs
    #[command(subcommand)]
    Get(GetCommand),
    /// Delete workloads or configs from the desired state
    #[command(subcommand)]
    Delete(DeleteCommand),
    /// Add a workload to the desired state
    #[command(subcommand)]
    Run(RunCommand),
    /// Change parts of the state
    #[command(subcommand)]
    Set(SetCommand),
    /// Apply (or with -d delete) the workloads and configs of manifests
    Apply(ApplyArgs),
    /// Print the logs of workloads
    Logs(LogsArgs),
    /// Wait until workloads meet a condition (Ready or Available)
    Wait(WaitArgs),
    /// Rerun or interrupt apply jobs
    #[command(subcommand)]
    Job(JobCommand),
    /// Show everything about one object, with its events
    #[command(subcommand)]
    Describe(DescribeCommand),
    /// Print the shell code that completes ank's commands, names and masks
    Completion {
        /// The shell: bash, zsh, fish, elvish or powershell
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

/// Shells `ank completion` writes code for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

impl CompletionShell {
    /// The name clap_complete knows the shell by.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bash => "bash",
            Self::Zsh => "zsh",
            Self::Fish => "fish",
            Self::Elvish => "elvish",
            Self::Powershell => "powershell",
        }
    }
}

/// Arguments of `ank logs`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// Keep printing new lines until interrupted
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only the last N lines of each workload (-1: all)
    #[arg(short = 't', long, default_value_t = -1, allow_negative_numbers = true, value_name = "N")]
    pub tail: i32,
    /// Prefix each line with the workload's name
    #[arg(short = 'n', long)]
    pub names: bool,
    /// Only lines since this time (RFC 3339, or a duration like 10m)
    #[arg(short = 's', long, value_name = "T")]
    pub since: Option<String>,
    /// Only lines until this time (RFC 3339, or a duration like 10m)
    #[arg(short = 'u', long, value_name = "T")]
    pub until: Option<String>,
    /// Names of the workloads
    #[arg(value_name = "NAME", required = true, add = crate::completers::workloads())]
    pub workloads: Vec<String>,
}

/// `ank job ...`
#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Start a new job over the unchanged desired state that retries the failed and the never-started workloads
    Rerun {
        /// Only the workloads that failed, not those never started
        #[arg(long = "failed-only")]
        failed_only: bool,
    },
    /// End a running job: its unfinished workloads count as failed
    Interrupt {
        /// The job's id
        #[arg(value_name = "ID")]
        id: u64,
    },
}

/// `ank describe ...`
#[derive(Debug, Subcommand)]
pub enum DescribeCommand {
    /// A workload: its spec, scheduling, placement, states, conditions and events
    Workload {
        /// The workload's name
        #[arg(value_name = "NAME")]
        name: String,
    },
}

/// Arguments of `ank wait`.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// What to wait for: workload/NAME (repeatable)
    #[arg(value_name = "workload/NAME", required_unless_present = "files", value_parser = parse_wait_target)]
    pub targets: Vec<String>,
    /// A manifest as a whole: it meets the condition when all its workloads do (repeatable, - for stdin)
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub files: Vec<String>,
    /// The condition: Ready (available at the current generation) or Available
    #[arg(long = "for", value_name = "CONDITION", default_value = "Ready", value_parser = ["Ready", "Available"])]
    pub condition: String,
    /// How long to wait, e.g. 60s, 5m, 500ms (a bare number is seconds)
    #[arg(long = "timeout", value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,
}

/// `workload/NAME` -> NAME.
fn parse_wait_target(s: &str) -> Result<String, FlagValueError> {
    let name = s
        .strip_prefix("workload/")
        .or_else(|| s.strip_prefix("workloads/"))
        .ok_or_else(|| FlagValueError::WaitTarget(s.to_owned()))?;
    ank_common::WorkloadName::new(name)?;
    Ok(name.to_owned())
}

/// A value of a flag or argument of `ank` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagValueError {
    #[error("'{0}' is not of the form workload/NAME")]
    WaitTarget(String),
    #[error(transparent)]
    Name(#[from] ank_common::NameError),
    #[error("'{0}' is not of the form KEY=VALUE")]
    KeyValue(String),
}

pub use ank_common::duration::parse_duration;

/// `ank delete ...`
#[derive(Debug, Subcommand)]
pub enum DeleteCommand {
    /// Delete workloads by name
    #[command(visible_alias = "workloads")]
    Workload {
        /// Names of the workloads to delete
        #[arg(value_name = "NAME", required = true, add = crate::completers::workloads())]
        names: Vec<String>,
    },
    /// Delete configs by name
    #[command(visible_alias = "configs")]
    Config {
        /// Names of the configs to delete
        #[arg(value_name = "NAME", required = true, add = crate::completers::configs())]
        names: Vec<String>,
    },
}

/// `ank set ...`
#[derive(Debug, Subcommand)]
pub enum SetCommand {
    /// Set the parts of the state the masks select to their values in a YAML file
    State(SetStateArgs),
}

/// Arguments of `ank set state`.
#[derive(Debug, Args)]
pub struct SetStateArgs {
    /// Field masks of the parts to set, e.g. desiredState.workloads.nginx
    #[arg(value_name = "MASK", required = true, num_args = 1.., add = crate::completers::masks())]
    pub masks: Vec<String>,
    /// YAML file with the new values in the shape of `ank get state`; `-` reads standard input
    #[arg(value_name = "FILE", required = true)]
    pub file: String,
}

/// `ank run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Add one workload
    Workload(RunWorkloadArgs),
}

/// Arguments of `ank run workload`.
#[derive(Debug, Args)]
pub struct RunWorkloadArgs {
    /// Name of the new workload
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Runtime, e.g. podman
    #[arg(long = "runtime", required = true)]
    pub runtime: String,
    /// Runtime configuration (the runtimeConfig string)
    #[arg(long = "config", required = true)]
    pub config: String,
    /// Agent that runs the workload
    #[arg(long = "agent", required = true)]
    pub agent: String,
    /// Tags as key=value, repeatable
    #[arg(long = "tags", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub tags: Vec<(String, String)>,
}

/// Arguments of `ank apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Manifest files; `-` reads standard input
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<String>,
    /// Run every workload of the manifests on this agent
    #[arg(long = "agent")]
    pub agent: Option<String>,
    /// Delete the workloads and configs the manifests name instead of applying them
    #[arg(short = 'd')]
    pub delete: bool,
    /// Refuse manifests with unknown fields (by default they are ignored
    /// with a warning, as Ankaios ignores them)
    #[arg(long = "strict")]
    pub strict: bool,
    /// Gate the update of every workload without its own `update`: it must
    /// be Ready within this time (e.g. 60s), see docs/health.md
    #[arg(long = "healthy-deadline", value_name = "DURATION")]
    pub healthy_deadline: Option<String>,
    /// With the gate: how long it must stay Ready (default 10s)
    #[arg(long = "min-healthy-time", value_name = "DURATION")]
    pub min_healthy_time: Option<String>,
    /// With the gate: put the last healthy spec back when it fails
    #[arg(long = "auto-revert")]
    pub auto_revert: bool,
}

impl ApplyArgs {
    /// The update gate the flags ask for, if any flag does.
    pub fn update_gate(&self) -> Option<ank_common::health_spec::UpdateGate> {
        let any = self.healthy_deadline.is_some() || self.min_healthy_time.is_some() || self.auto_revert;
        any.then(|| ank_common::health_spec::UpdateGate {
            healthy_deadline: self.healthy_deadline.clone(),
            min_healthy_time: self.min_healthy_time.clone(),
            auto_revert: self.auto_revert.then_some(true),
        })
    }
}

fn parse_key_value(s: &str) -> Result<(String, String), FlagValueError> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(FlagValueError::KeyValue(s.to_owned())),
    }
}

/// Why the connection settings cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SettingsError {
    #[error("{0}")]
    Tls(String),
    /// Neither all three PEM items nor `--insecure` (Ankaios' message).
    #[error("{}", .0.cli_message())]
    MissingCertificates(tls::MissingCertificates),
}

impl Cli {
    /// The URL to connect to: the explicit one, else the default for the
    /// chosen security mode. With `--insecure` an `https://` URL is
    /// rewritten to `http://`, because insecure means plain HTTP/2.
    pub fn resolved_server_url(&self) -> Result<String, SettingsError> {
        if self.tls_sources()?.is_some() {
            return match &self.server_url {
                None => Ok(DEFAULT_SERVER_URL.to_owned()),
                Some(url) if url.starts_with("https://") => Ok(url.clone()),
                Some(url) if !url.contains("://") => Ok(format!("https://{url}")),
                Some(url) => Err(SettingsError::Tls(format!(
                    "server url '{url}' must start with https:// when certificates are given"
                ))),
            };
        }
        Ok(match &self.server_url {
            None => DEFAULT_INSECURE_SERVER_URL.to_owned(),
            Some(url) => match url.strip_prefix("https://") {
                Some(rest) => format!("http://{rest}"),
                None if url.contains("://") => url.clone(),
                None => format!("http://{url}"),
            },
        })
    }

    /// The mTLS set-up, `None` with `--insecure`; an error unless exactly
    /// one of the two is configured.
    pub fn tls_sources(&self) -> Result<Option<TlsSources>, SettingsError> {
        self.tls.sources().map_err(SettingsError::MissingCertificates)
    }

    /// Ankaios' warning for `--insecure` given together with PEM items.
    pub fn tls_conflict(&self) -> Option<&'static str> {
        self.tls.conflict()
    }

    /// The bound on each wait for a response.
    pub fn response_timeout(&self) -> Duration {
        Duration::from_millis(self.response_timeout_ms)
    }

    /// Whether commands that change the state wait for the workloads.
    pub fn wait(&self) -> bool {
        !self.no_wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ank").chain(args.iter().copied()))
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cli_defaults() {
        let cli = parse(&["get", "workloads"]).unwrap();
        assert_eq!(cli.response_timeout_ms, 3000);
        assert!(!cli.no_wait && !cli.quiet && !cli.verbose);
        assert!(matches!(cli.command, Command::Get(GetCommand::Workload(_))));
        let cli = parse(&["get", "state"]).unwrap();
        let Command::Get(GetCommand::State(args)) = cli.command else { panic!("not get state") };
        assert_eq!(args.output_format, OutputFormat::Yaml);
        assert!(args.masks.is_empty());
    }

    #[test]
    fn cli_insecure_switches_default_url_to_http() {
        let cli = parse(&["-k", "get", "agents"]).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "http://127.0.0.1:25551");
        let cli = parse(&["-k", "-s", "https://10.0.0.1:1234", "get", "agents"]).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "http://10.0.0.1:1234");
        let cli = parse(&["-s", "http://h:1", "get", "state", "-k"]).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "http://h:1");
    }

    #[test]
    fn cli_needs_certificates_or_insecure() {
        let cli = parse(&["get", "agents"]).unwrap();
        assert_eq!(cli.server_url, None);
        let e = cli.resolved_server_url().unwrap_err().to_string();
        assert_eq!(
            e,
            "Missing certificate files: Either provide mTLS config via the '--ca_pem \"\"', '--crt_pem \"\"' and \
             '--key_pem \"\"' options or deactivate mTLS with the '--insecure' option!"
        );
        // Ankaios' system test: the CA is missing.
        let cli = parse(&["--crt_pem", "/c/cli.pem", "--key_pem", "/c/cli-key.pem", "get", "workloads"]).unwrap();
        let e = cli.resolved_server_url().unwrap_err();
        assert!(e.to_string().contains("'--ca_pem \"\"', '--crt_pem /c/cli.pem' and '--key_pem /c/cli-key.pem'"));
        assert_eq!(crate::exit_code(&anyhow::Error::new(e)), 1);
        // With all three, --insecure loses (with a warning), as in Ankaios.
        let cli = parse(&["-k", "--ca_pem", "a", "--crt_pem", "b", "--key_pem", "c", "get", "agents"]).unwrap();
        assert!(cli.tls_sources().unwrap().is_some());
        assert_eq!(cli.tls_conflict(), Some(ank_common::tls::INSECURE_AND_SECURE));
        let pems = ["--ca_pem", "ca.pem", "--crt_pem", "c.pem", "--key_pem", "k.pem"];
        let cli = parse(&[&pems[..], &["get", "agents"]].concat()).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "https://127.0.0.1:25551");
        let cli = parse(&[&pems[..], &["-s", "http://h:1", "get", "agents"]].concat()).unwrap();
        assert!(matches!(cli.resolved_server_url(), Err(SettingsError::Tls(e)) if e.contains("https://")));
    }

    #[test]
    fn cli_run_workload_requires_runtime_agent_and_config() {
        let full = ["run", "workload", "w", "--runtime", "podman", "--agent", "a", "--config", "image: x"];
        let cli = parse(&full).unwrap();
        let Command::Run(RunCommand::Workload(args)) = cli.command else { panic!("not run") };
        assert_eq!((args.name.as_str(), args.runtime.as_str(), args.agent.as_str()), ("w", "podman", "a"));
        assert_eq!(args.config, "image: x");
        for missing in ["--runtime", "--agent", "--config"] {
            let i = full.iter().position(|a| *a == missing).unwrap();
            let args: Vec<&str> =
                full.iter().enumerate().filter(|(j, _)| *j != i && *j != i + 1).map(|(_, a)| *a).collect();
            let err = parse(&args).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument, "{missing}");
            assert!(err.to_string().contains(missing), "{err}");
        }
    }

    #[test]
    fn cli_run_workload_tags_are_key_value_pairs() {
        let base = ["run", "workload", "w", "--runtime", "r", "--agent", "a", "--config", "c"];
        let cli = parse(&[&base[..], &["--tags", "owner=me", "--tags", "x=a=b"]].concat()).unwrap();
        let Command::Run(RunCommand::Workload(args)) = cli.command else { panic!("not run") };
        assert_eq!(args.tags, vec![("owner".into(), "me".into()), ("x".into(), "a=b".into())]);
        assert!(parse(&[&base[..], &["--tags", "novalue"]].concat()).is_err());
    }

    #[test]
    fn cli_get_workloads_filters_and_apply_options() {
        let cli = parse(&["-k", "get", "workload", "-a", "agent_A", "-s", "Running", "nginx"]).unwrap();
        let Command::Get(GetCommand::Workload(args)) = cli.command else { panic!("not get workload") };
        assert_eq!(args.agent.as_deref(), Some("agent_A"));
        assert_eq!(args.state.as_deref(), Some("Running"));
        assert_eq!(args.names, vec!["nginx"]);
        let cli = parse(&["--no-wait", "apply", "-d", "--agent", "b", "m.yaml", "-"]).unwrap();
        assert!(cli.no_wait);
        let Command::Apply(args) = cli.command else { panic!("not apply") };
        assert!(args.delete);
        assert_eq!(args.files, vec!["m.yaml", "-"]);
        assert_eq!(
            parse(&["delete", "workloads"]).unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument
        );
        let cli = parse(&["wait", "workload/web", "--for", "Ready", "--timeout", "5m"]).unwrap();
        let Command::Wait(w) = cli.command else { panic!("not wait") };
        assert_eq!((w.targets, w.condition, w.timeout.as_secs()), (vec!["web".to_owned()], "Ready".to_owned(), 300));
        assert!(parse(&["wait", "web"]).is_err(), "the kind is required");
        assert!(parse(&["wait", "workload/web", "--timeout", "5 parsecs"]).is_err());
        assert_eq!(parse_duration("500ms"), Ok(std::time::Duration::from_millis(500)));
    }

    // [test of feature K6]
    // [test of feature K9]
    #[test]
    fn cli_get_groups_and_rendered_workloads() {
        let cli = parse(&["-k", "get", "groups", "-o", "json"]).unwrap();
        let Command::Get(GetCommand::Group(args)) = cli.command else { panic!("not get groups") };
        assert_eq!(args.output, Some(OutputFormat::Json));
        let cli = parse(&["-k", "get", "workload", "web", "--rendered", "-o", "yaml"]).unwrap();
        let Command::Get(GetCommand::Workload(args)) = cli.command else { panic!("not get workload") };
        assert!(args.rendered && args.names == ["web"]);
        assert!(parse(&["-k", "get", "workloads", "--rendered", "-w"]).is_err(), "a rendered spec is not watched");
    }
}
