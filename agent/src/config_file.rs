//! The config file of `ank-agent` (`-x, --agent-config`, default
//! [`DEFAULT_AGENT_CONFIG`] when it exists): its keys, and merging them into
//! the parsed [`Cli`] with the precedence: flag, then environment variable,
//! then file, then built-in default. A value is taken from the file only
//! when clap reports that the flag was neither on the command line nor in
//! the environment. [`Cli::into_config`] validates the merged result. Keys
//! it does not know are ignored with a warning, as Ankaios ignores them;
//! Ankaios' `[tags]` are the agent's tags (like `[labels]`), its
//! `runtimes` list selects the runtimes the agent offers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ank_common::config_file::{self, ConfigFileError, Loaded, fill, fill_pem};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde::Deserialize;

use crate::cli::Cli;

/// Config file read when `-x` is not given, if it exists.
pub const DEFAULT_AGENT_CONFIG: &str = "/etc/ankaios/ank-agent.conf";

/// The keys of `ank-agent.conf`.
#[derive(Debug, Default, Deserialize)]
pub struct AgentConfigFile {
    /// Checked by [`config_file::parse`]; always `v1`.
    pub version: String,
    pub name: Option<String>,
    pub server_url: Option<String>,
    pub run_folder: Option<PathBuf>,
    pub insecure: Option<bool>,
    pub check_server_url_host: Option<bool>,
    pub ca_pem: Option<PathBuf>,
    pub crt_pem: Option<PathBuf>,
    pub key_pem: Option<PathBuf>,
    pub ca_pem_content: Option<ank_common::tls::PemText>,
    pub crt_pem_content: Option<ank_common::tls::PemText>,
    pub key_pem_content: Option<ank_common::tls::PemText>,
    pub create_retries: Option<u32>,
    pub create_retry_interval_ms: Option<u64>,
    pub heartbeat_interval_ms: Option<u64>,
    pub heartbeat_timeout_ms: Option<u64>,
    pub max_parallel_creates: Option<usize>,
    pub shutdown_grace_ms: Option<u64>,
    pub stop_workloads_on_shutdown: Option<bool>,
    /// `[labels]`: the agent's tags, which agent selectors match.
    pub labels: Option<BTreeMap<String, String>>,
    /// `[tags]`: Ankaios' name of the same table; both are merged, `[labels]`
    /// winning for a key given in both.
    pub tags: Option<BTreeMap<String, String>>,
    /// Ankaios' `runtimes`: the runtimes the agent offers (all by default).
    pub runtimes: Option<Vec<String>>,
    /// Capabilities besides the runtimes (`capabilities = ['gpu']`).
    pub capabilities: Option<Vec<String>>,
    /// `[metrics]`: static metrics (name = number).
    #[serde(default, deserialize_with = "finite_metrics")]
    pub metrics: Option<BTreeMap<String, f64>>,
    /// Scheduler keys, see [`crate::scheduler_cli`].
    pub max_workloads: Option<u32>,
    #[serde(default, deserialize_with = "crate::scheduler_cli::memory")]
    pub max_memory: Option<u64>,
    #[serde(default, deserialize_with = "crate::scheduler_cli::tick")]
    pub scheduler_tick: Option<std::time::Duration>,
    pub preemption: Option<crate::scheduler_cli::PreemptionFile>,
    pub retention: Option<RetentionSection>,
}

/// The `[retention]` table: how long finished workloads keep their
/// containers, as durations (`'1m'`, `'72h'`).
// [feature K7: retention in the config file]
#[derive(Debug, Default, Deserialize)]
pub struct RetentionSection {
    #[serde(default, deserialize_with = "ank_common::duration::optional")]
    pub succeeded: Option<Duration>,
    #[serde(default, deserialize_with = "ank_common::duration::optional")]
    pub failed: Option<Duration>,
}

/// The `[metrics]` table; every value a finite number.
fn finite_metrics<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<BTreeMap<String, f64>>, D::Error> {
    let metrics = BTreeMap::<String, f64>::deserialize(d)?;
    match metrics.iter().find(|(_, v)| !v.is_finite()) {
        Some((name, v)) => Err(serde::de::Error::custom(format!("metric '{name}': {v} is not a finite number"))),
        None => Ok(Some(metrics)),
    }
}

/// Parses the process' command line (clap prints usage errors and exits)
/// and merges the config file into it. Returns the file used, if any, and
/// the warnings about its keys.
pub fn parse_cli() -> Result<(Cli, Loaded), ConfigFileError> {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let loaded = apply(&mut cli, &matches, Path::new(DEFAULT_AGENT_CONFIG))?;
    Ok((cli, loaded))
}

/// Reads the config file `-x` names, else `default_path` if it exists, and
/// fills the values of `cli` that came from neither flag nor environment.
pub fn apply(cli: &mut Cli, matches: &ArgMatches, default_path: &Path) -> Result<Loaded, ConfigFileError> {
    let defaults = [default_path.to_path_buf()];
    let Some(path) = config_file::choose_path(cli.agent_config.as_deref(), &defaults, Path::exists)? else {
        return Ok(Loaded::default());
    };
    let (file, warnings) = read(&path)?;
    merge(cli, matches, file);
    Ok(Loaded { path: Some(path), warnings })
}

/// Reads and checks one config file; also returns the warnings about keys
/// that are ignored.
pub fn read(path: &Path) -> Result<(AgentConfigFile, Vec<String>), ConfigFileError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: label.clone(), source })?;
    let (file, warnings): (AgentConfigFile, _) = config_file::parse_lenient(&label, &text)?;
    config_file::check_path_or_content(&label, "ca_pem", file.ca_pem.is_some(), file.ca_pem_content.is_some())?;
    config_file::check_path_or_content(&label, "crt_pem", file.crt_pem.is_some(), file.crt_pem_content.is_some())?;
    config_file::check_path_or_content(&label, "key_pem", file.key_pem.is_some(), file.key_pem_content.is_some())?;
    Ok((file, warnings))
}

fn merge(cli: &mut Cli, m: &ArgMatches, file: AgentConfigFile) {
    fill(&mut cli.name, file.name.map(Some), m, "name");
    fill(&mut cli.server_url, file.server_url.map(Some), m, "server_url");
    fill(&mut cli.run_folder, file.run_folder.map(Some), m, "run_folder");
    fill(&mut cli.insecure, file.insecure, m, "insecure");
    fill(&mut cli.check_server_url_host, file.check_server_url_host, m, "check_server_url_host");
    fill(&mut cli.create_retries, file.create_retries, m, "create_retries");
    fill(&mut cli.create_retry_interval_ms, file.create_retry_interval_ms, m, "create_retry_interval_ms");
    fill(&mut cli.heartbeat_interval_ms, file.heartbeat_interval_ms, m, "heartbeat_interval_ms");
    fill(&mut cli.heartbeat_timeout_ms, file.heartbeat_timeout_ms, m, "heartbeat_timeout_ms");
    fill(&mut cli.max_parallel_creates, file.max_parallel_creates, m, "max_parallel_creates");
    fill(&mut cli.shutdown_grace_ms, file.shutdown_grace_ms, m, "shutdown_grace_ms");
    fill(&mut cli.stop_workloads_on_shutdown, file.stop_workloads_on_shutdown, m, "stop_workloads_on_shutdown");
    let retention = file.retention.unwrap_or_default();
    fill(&mut cli.retain_succeeded, retention.succeeded, m, "retain_succeeded");
    fill(&mut cli.retain_failed, retention.failed, m, "retain_failed");
    let tags = match (file.tags, file.labels) {
        (None, None) => None,
        (tags, labels) => Some(tags.into_iter().flatten().chain(labels.into_iter().flatten()).collect()),
    };
    fill(&mut cli.tags, tags.map(|t: BTreeMap<String, String>| t.into_iter().collect()), m, "tags");
    cli.runtimes = file.runtimes;
    fill(&mut cli.capabilities, file.capabilities, m, "capabilities");
    fill(&mut cli.metrics, file.metrics.map(|l| l.into_iter().collect()), m, "metrics");
    let scheduler = crate::scheduler_cli::SchedulerFile {
        max_workloads: file.max_workloads,
        max_memory: file.max_memory,
        scheduler_tick: file.scheduler_tick,
        preemption: file.preemption,
    };
    crate::scheduler_cli::merge(&mut cli.scheduling, m, scheduler);
    // A PEM given by flag or environment replaces the file's path and content.
    fill_pem((&mut cli.ca_pem, &mut cli.ca_pem_content), (file.ca_pem, file.ca_pem_content), m, "ca_pem");
    fill_pem((&mut cli.crt_pem, &mut cli.crt_pem_content), (file.crt_pem, file.crt_pem_content), m, "crt_pem");
    fill_pem((&mut cli.key_pem, &mut cli.key_pem_content), (file.key_pem, file.key_pem_content), m, "key_pem");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CliError;
    use std::io::Write;

    fn conf(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn resolve_with(cmd: clap::Command, argv: &[&str], default: &Path) -> Result<Cli, ConfigFileError> {
        let m = cmd.try_get_matches_from(std::iter::once("ank-agent").chain(argv.iter().copied())).unwrap();
        let mut cli = Cli::from_arg_matches(&m).unwrap();
        apply(&mut cli, &m, default).map(|_| cli)
    }

    fn resolve(argv: &[&str], default: &Path) -> Result<Cli, ConfigFileError> {
        resolve_with(Cli::command(), argv, default)
    }

    const FULL: &str = "version = 'v1'\nname = 'agent_F'\nserver_url = 'http://10.0.0.1:25551'\n\
                        run_folder = '/run/ank'\ninsecure = true\ncreate_retries = 4\n\
                        create_retry_interval_ms = 50\nmax_parallel_creates = 2\nkey_pem_content = 'KEY'\n";

    #[test]
    fn agent_config_file_values_used_without_flags() {
        let f = conf(FULL);
        let mut cli = resolve(&[], f.path()).unwrap();
        assert_eq!(cli.key_pem_content.as_deref(), Some("KEY"));
        cli.key_pem_content = None; // a lone key with insecure = true is refused
        let c = cli.into_config().unwrap();
        assert_eq!(c.name, "agent_F", "the name from the file is enough");
        assert_eq!(c.server_url, "http://10.0.0.1:25551");
        assert_eq!(c.run_folder, PathBuf::from("/run/ank"));
        assert_eq!(c.max_parallel_creates, 2);
        assert_eq!(c.retry_policy.max_retries, 4);
        assert_eq!(c.retry_policy.interval, Duration::from_millis(50));
    }

    #[test]
    fn agent_config_flags_beat_the_file() {
        let f = conf(FULL);
        let argv = ["-n", "agent_B", "-s", "http://h:1", "--create-retries", "9", "--key_pem", "/k.pem"];
        let mut cli = resolve(&argv, f.path()).unwrap();
        assert_eq!((cli.key_pem.as_deref(), cli.key_pem_content.as_deref()), (Some(Path::new("/k.pem")), None));
        cli.key_pem = None;
        let c = cli.into_config().unwrap();
        assert_eq!(c.name, "agent_B");
        assert_eq!(c.server_url, "http://h:1");
        assert_eq!(c.retry_policy.max_retries, 9);
        assert_eq!(c.run_folder, PathBuf::from("/run/ank"), "keys without a flag still come from the file");
    }

    #[test]
    fn agent_config_env_beats_the_file() {
        // The flags' real variables are remapped to names no other test
        // uses; nextest runs each test in its own process. clap reads the
        // variables when `.env()` is called, so they are set first.
        // SAFETY: only this test reads or writes these variables.
        unsafe {
            std::env::set_var("ANKAGENT_TEST_CONFIG_FILE_RETRIES", "7");
            std::env::set_var("ANKAGENT_TEST_CONFIG_FILE_INSECURE", "false");
        }
        let cmd = Cli::command()
            .mut_arg("create_retries", |a| a.env("ANKAGENT_TEST_CONFIG_FILE_RETRIES"))
            .mut_arg("insecure", |a| a.env("ANKAGENT_TEST_CONFIG_FILE_INSECURE"));
        let cli = resolve_with(cmd, &[], conf(FULL).path()).unwrap();
        assert_eq!(cli.create_retries, 7);
        assert!(!cli.insecure, "ANKAGENT_INSECURE=false beats insecure = true");
        assert!(matches!(cli.into_config().unwrap_err(), CliError::MissingCertificates(_)), "only key_pem_content");
    }

    // [test of feature S1: labels, capabilities and metrics from the config file]
    #[test]
    fn agent_config_advertisement_keys_under_flags() {
        let f = conf(
            "version = 'v1'\nname = 'a'\ninsecure = true\ncapabilities = ['gpu']\n\
             [labels]\narch = 'arm64'\n[metrics]\nspeed = 2.5\n",
        );
        let c = resolve(&[], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.tags.get("arch").map(String::as_str), Some("arm64"));
        assert_eq!((c.capabilities, c.metrics.get("speed")), (vec!["gpu".to_owned()], Some(&2.5)));
        let c = resolve(&["--label", "arch=x86_64", "--capability", "npu"], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.tags.get("arch").map(String::as_str), Some("x86_64"), "the flag beats the file");
        assert_eq!(c.capabilities, ["npu"]);
        assert_eq!(c.metrics.get("speed"), Some(&2.5));
        let f = conf("version = 'v1'\n[metrics]\nspeed = inf\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.contains("key 'metrics'") && e.contains("speed"), "{e}");
    }

    #[test]
    // [test of feature K7]
    fn agent_config_retention_section_is_read_and_flags_beat_it() {
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\n[retention]\nsucceeded = '30s'\nfailed = '1h'\n");
        let c = resolve(&[], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.retention.succeeded, Duration::from_secs(30));
        assert_eq!(c.retention.failed, Duration::from_secs(3600));
        let c = resolve(&["--retain-failed", "5m"], f.path()).unwrap().into_config().unwrap();
        assert_eq!((c.retention.succeeded, c.retention.failed), (Duration::from_secs(30), Duration::from_secs(300)));
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\n[retention]\nfailed = '3 weeks'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:5: key 'retention.failed'", f.path().display())), "{e}");
        assert!(e.contains("unknown unit"), "{e}");
        let f = conf("version = 'v1'\n[retention]\nsucceded = '1m'\n");
        let (_, warnings) = read(f.path()).unwrap();
        assert_eq!(
            warnings,
            [format!("config file '{}': unknown key 'retention.succeded' ignored", f.path().display())]
        );
    }

    #[test]
    fn agent_config_name_is_required_after_merging() {
        let f = conf("version = 'v1'\ninsecure = true\n");
        let cli = resolve(&[], f.path()).unwrap();
        assert_eq!(cli.into_config().unwrap_err(), CliError::MissingName);
    }

    #[test]
    fn agent_config_explicit_file_must_exist() {
        let e = resolve(&["-x", "/nonexistent/ank-agent.conf"], Path::new("/nonexistent/default")).unwrap_err();
        assert_eq!(e.to_string(), "config file '/nonexistent/ank-agent.conf' does not exist");
        let explicit = conf("version = 'v1'\nname = 'from_x'\n");
        let cli = resolve(&["--agent-config", explicit.path().to_str().unwrap()], conf(FULL).path()).unwrap();
        assert_eq!(cli.name.as_deref(), Some("from_x"));
        assert!(!cli.insecure, "the default file is not read when -x is given");
    }

    #[test]
    fn agent_config_bad_files_name_file_key_and_line() {
        let f = conf("version = 'v1'\nname = 'a'\ntags = 'x'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:3: key 'tags': invalid type", f.path().display())), "{e}");
        let f = conf("version = 'v1'\ncreate_retries = -1\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: key 'create_retries': ", f.path().display())), "{e}");
        let f = conf("name = 'a'\n");
        let e = resolve(&[], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::MissingVersion { ref path } if path == &f.path().display().to_string()));
        let f = conf("version = 'v1'\nca_pem = '/ca'\nca_pem_content = 'CA'\n");
        let e = resolve(&[], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::PathAndContent { ref key, .. } if key == "ca_pem"), "{e}");
    }

    /// The keys of Ankaios' `tests/resources/configs/ank-agent_with_certificates_paths.conf`
    /// (but `insecure` as a boolean: Ankaios refuses its string 'false' as well).
    const ANKAIOS_AGENT_CONF: &str = "version = 'v1'\nname = 'agent_B'\nserver_url = 'https://127.0.0.1:25551'\n\
        run_folder = '/tmp/ankaios/'\ninsecure = false\nca_pem = '''/tmp/.certs/ca.pem'''\n\
        crt_pem = '''/tmp/.certs/agent.pem'''\nkey_pem = '''/tmp/.certs/agent-key.pem'''\n";

    #[test]
    fn agent_config_reads_ankaios_files_with_tags_and_runtimes() {
        let text = format!("{ANKAIOS_AGENT_CONF}runtimes = ['podman', 'containerd']\nfuture = 1\n[tags]\nzone = 'a'\n");
        let f = conf(&text);
        let (_, warnings) = read(f.path()).unwrap();
        assert_eq!(warnings, [format!("config file '{}': unknown key 'future' ignored", f.path().display())]);
        let cli = resolve(&[], f.path()).unwrap();
        assert_eq!(cli.runtimes, Some(vec!["podman".to_owned(), "containerd".to_owned()]));
        assert_eq!(cli.ca_pem, Some(PathBuf::from("/tmp/.certs/ca.pem")));
        assert_eq!((cli.name.as_deref(), cli.insecure), (Some("agent_B"), false));
        assert_eq!(cli.tags, [("zone".to_owned(), "a".to_owned())]);
        let f = conf("version = 'v1'\n[tags]\nzone = 'a'\nrole = 't'\n[labels]\nzone = 'b'\n");
        let mut tags = resolve(&[], f.path()).unwrap().tags;
        tags.sort();
        assert_eq!(tags, [("role".to_owned(), "t".to_owned()), ("zone".to_owned(), "b".to_owned())]);
        // Invalid values of known keys are still errors, as in Ankaios.
        let f = conf("version = 'v1'\ninsecure = 'false'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.contains(":2: key 'insecure'"), "{e}");
        let f = conf("version = 'v1'\nruntimes = 'podman'\n");
        assert!(resolve(&[], f.path()).is_err());
    }

    #[test]
    fn agent_config_example_parses() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/config/ank-agent.conf");
        let cli = resolve(&["-x", example.to_str().unwrap()], Path::new("/nonexistent")).unwrap();
        let c = cli.into_config().unwrap();
        assert_eq!(c.name, "agent_A");
        assert_eq!(c.retention, crate::Retention::default(), "the example spells out the defaults");
        assert_eq!((c.tags.get("arch").map(String::as_str), c.capabilities.len()), (Some("arm64"), 1));
    }
}
