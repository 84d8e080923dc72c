//! The config file of `ank-agent` (`-x, --agent-config`, default
//! [`DEFAULT_AGENT_CONFIG`] when it exists): its keys and the flags they
//! sit under, for the loader in [`ank_common::config_file`] (flag, then
//! environment variable, then file, then built-in default).
//! [`Cli::into_config`] validates the merged result. Ankaios' `[tags]` are
//! the agent's tags (like `[labels]`), its `runtimes` list selects the
//! runtimes the agent offers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ank_common::config_file::{self, ConfigFileError, Loaded, fill};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde::Deserialize;

use crate::cli::Cli;

/// Config file read when `-x` is not given, if it exists.
pub const DEFAULT_AGENT_CONFIG: &str = "/etc/ankaios/ank-agent.conf";

ank_common::config_keys! {
    /// The keys of `ank-agent.conf`.
    pub struct AgentConfigFile for Cli {
        flags {
            name: String,
            server_url: String,
            run_folder: PathBuf,
            insecure: bool => tls.insecure,
            check_server_url_host: bool,
            crl_pem: PathBuf => tls.crl_pem,
            create_retries: u32,
            create_retry_interval_ms: u64,
            heartbeat_interval_ms: u64,
            heartbeat_timeout_ms: u64,
            max_parallel_creates: usize,
            shutdown_grace_ms: u64,
            stop_workloads_on_shutdown: bool,
            #[serde(deserialize_with = "ank_common::duration::optional")]
            podman_reconcile_interval: Duration,
            /// The `containerd` runtime: socket, namespace, snapshotter.
            containerd_address: PathBuf,
            containerd_namespace: String,
            containerd_snapshotter: String,
            /// The crash-loop delays of workloads without their own (`'1s,5m'` or `'off'`).
            #[serde(deserialize_with = "crate::workload::crash_loop::optional_agent_backoff")]
            restart_backoff: crate::workload::crash_loop::AgentBackoff,
            /// Capabilities besides the runtimes (`capabilities = ['gpu']`).
            capabilities: Vec<String>,
            /// `[metrics]`: static metrics (name = number).
            #[serde(deserialize_with = "finite_metrics")]
            metrics: BTreeMap<String, f64>,
            /// Scheduler keys, see [`crate::scheduler_cli`].
            max_workloads: u32 => scheduling.max_workloads,
            #[serde(deserialize_with = "crate::scheduler_cli::memory")]
            max_memory: u64 => scheduling.max_memory,
            #[serde(deserialize_with = "crate::scheduler_cli::tick")]
            scheduler_tick: Duration => scheduling.scheduler_tick,
        }
        pem PathBuf => tls { ca_pem + ca_pem_content, crt_pem + crt_pem_content, key_pem + key_pem_content }
        tables {
            preemption: PreemptionFile,
            retention: RetentionSection,
        }
        no_flag {
            /// Ankaios' `runtimes`: the runtimes the agent offers (all by default).
            runtimes: Vec<String> => runtimes,
        }
        own by merge_tags {
            /// `[labels]`: the agent's tags, which agent selectors match.
            labels: BTreeMap<String, String>,
            /// `[tags]`: Ankaios' name of the same table; both are merged,
            /// `[labels]` winning for a key given in both.
            tags: BTreeMap<String, String>,
        }
    }
}

ank_common::config_keys! {
    /// The `[retention]` table: how long finished workloads keep their
    /// containers, as durations (`'1m'`, `'72h'`) or `'never'` (the default).
    // [feature K7: retention in the config file]
    pub struct RetentionSection for Cli {
        flags {
            #[serde(deserialize_with = "crate::workload::retention::optional_retain_for")]
            succeeded: crate::workload::retention::RetainFor => retain_succeeded,
            #[serde(deserialize_with = "crate::workload::retention::optional_retain_for")]
            failed: crate::workload::retention::RetainFor => retain_failed,
        }
    }
}

ank_common::config_keys! {
    /// The config file's `[preemption]` table.
    pub struct PreemptionFile for Cli {
        flags {
            enabled: bool => scheduling.preemption_enabled,
            #[serde(deserialize_with = "ank_common::duration::optional")]
            delay: Duration => scheduling.preemption_delay,
            #[serde(deserialize_with = "ank_common::duration::optional")]
            postpone: Duration => scheduling.preemption_postpone,
            #[serde(deserialize_with = "crate::scheduler_cli::rate")]
            rate: u8 => scheduling.preemption_rate,
        }
    }
}

/// `[labels]` over `[tags]`, under the `--tag` flags.
fn merge_tags(
    cli: &mut Cli,
    m: &ArgMatches,
    labels: Option<BTreeMap<String, String>>,
    tags: Option<BTreeMap<String, String>>,
) {
    let merged = match (tags, labels) {
        (None, None) => None,
        (tags, labels) => {
            Some(tags.into_iter().flatten().chain(labels.into_iter().flatten()).collect::<BTreeMap<_, _>>())
        }
    };
    fill(&mut cli.tags, merged, m, "tags");
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
    let explicit = cli.agent_config.clone();
    config_file::apply::<AgentConfigFile>(cli, matches, explicit.as_deref(), &[default_path.to_path_buf()])
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
        assert_eq!(cli.tls.key_pem_content.as_deref(), Some("KEY"));
        cli.tls.key_pem_content = None; // a lone key with insecure = true is refused
        let c = cli.into_config().unwrap();
        assert_eq!(c.name, "agent_F", "the name from the file is enough");
        assert_eq!(c.server_url, "http://10.0.0.1:25551");
        assert_eq!(c.run_folder, PathBuf::from("/run/ank"));
        assert_eq!(c.max_parallel_creates, 2);
        assert_eq!(c.retry_policy, crate::RetryPolicy::limited(4, Duration::from_millis(50)));
    }

    #[test]
    fn agent_config_flags_beat_the_file() {
        let f = conf(FULL);
        let argv = ["-n", "agent_B", "-s", "http://h:1", "--create-retries", "9", "--key_pem", "/k.pem"];
        let mut cli = resolve(&argv, f.path()).unwrap();
        assert_eq!((cli.tls.key_pem.as_deref(), cli.tls.key_pem_content.as_deref()), (Some(Path::new("/k.pem")), None));
        cli.tls.key_pem = None;
        let c = cli.into_config().unwrap();
        assert_eq!(c.name, "agent_B");
        assert_eq!(c.server_url, "http://h:1");
        assert_eq!(c.retry_policy, crate::RetryPolicy::limited(9, Duration::from_millis(50)));
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
        assert_eq!(cli.create_retries, Some(7));
        assert!(!cli.tls.insecure, "ANKAGENT_INSECURE=false beats insecure = true");
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
    fn agent_config_podman_reconcile_interval_is_a_duration() {
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\npodman_reconcile_interval = '2m'\n");
        assert_eq!(resolve(&[], f.path()).unwrap().podman_reconcile_interval, Duration::from_secs(120));
        let cli = resolve(&["--podman-reconcile-interval", "1h"], f.path()).unwrap();
        assert_eq!(cli.podman_reconcile_interval, Duration::from_secs(3600), "the flag beats the file");
    }

    #[test]
    fn agent_config_restart_backoff_under_env_and_flag() {
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\nrestart_backoff = '3s,30s'\n");
        let c = resolve(&[], f.path()).unwrap().into_config().unwrap();
        let s = c.restart_backoff.expect("from the file");
        assert_eq!((s.initial_delay, s.max_delay), (Duration::from_secs(3), Duration::from_secs(30)));
        let c = resolve(&["--restart-backoff", "off"], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.restart_backoff, None, "the flag beats the file");
        let f = conf("version = 'v1'\nrestart_backoff = 'soon'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: key 'restart_backoff'", f.path().display())), "{e}");
    }

    #[test]
    // [test of feature K7]
    fn agent_config_retention_section_is_read_and_flags_beat_it() {
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\n[retention]\nsucceeded = '30s'\nfailed = '1h'\n");
        let c = resolve(&[], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.retention, crate::Retention::after(Duration::from_secs(30), Duration::from_secs(3600)));
        let c = resolve(&["--retain-failed", "5m"], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.retention, crate::Retention::after(Duration::from_secs(30), Duration::from_secs(300)));
        let c = resolve(&["--retain-failed", "never"], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.retention.failed, crate::workload::retention::RetainFor::Never);
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\n[retention]\nsucceeded = 'never'\n");
        let c = resolve(&[], f.path()).unwrap().into_config().unwrap();
        assert_eq!(c.retention, crate::Retention::default(), "'never', and a key left out, keep finished workloads");
        let f = conf("version = 'v1'\nname = 'a'\ninsecure = true\n[retention]\nfailed = '3 parsecs'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:5: key 'retention.failed'", f.path().display())), "{e}");
        assert!(e.contains("unknown unit"), "{e}");
        let f = conf("version = 'v1'\n[retention]\nsucceded = '1m'\n");
        let (_, warnings) = config_file::read::<AgentConfigFile>(f.path()).unwrap();
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
        assert!(!cli.tls.insecure, "the default file is not read when -x is given");
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
        let (_, warnings) = config_file::read::<AgentConfigFile>(f.path()).unwrap();
        assert_eq!(warnings, [format!("config file '{}': unknown key 'future' ignored", f.path().display())]);
        let cli = resolve(&[], f.path()).unwrap();
        assert_eq!(cli.runtimes, Some(vec!["podman".to_owned(), "containerd".to_owned()]));
        assert_eq!(cli.tls.ca_pem, Some(PathBuf::from("/tmp/.certs/ca.pem")));
        assert_eq!((cli.name.as_deref(), cli.tls.insecure), (Some("agent_B"), false));
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
        assert_eq!(c.retry_policy, crate::RetryPolicy::default(), "its create_retries are commented out");
        assert_eq!(c.restart_backoff, None, "the example spells out the default: off");
        assert_eq!((c.tags.get("arch").map(String::as_str), c.capabilities.len()), (Some("arm64"), 1));
    }
}
