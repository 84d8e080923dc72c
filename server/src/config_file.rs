//! The config file of `ank-server` (`-x, --server-config`, default
//! [`DEFAULT_SERVER_CONFIG`] when it exists): its keys and the flags they
//! sit under, for the loader in [`ank_common::config_file`] (flag, then
//! environment variable, then file, then built-in default). Ankaios'
//! `[[mutating_hooks]]` (name, prio, path) are read with our optional
//! `timeout_ms`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ank_common::config_file::{self, ConfigFileError, Loaded};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde::Deserialize;

use crate::cli::Args;

/// Config file read when `-x` is not given, if it exists.
pub const DEFAULT_SERVER_CONFIG: &str = "/etc/ankaios/ank-server.conf";

ank_common::config_keys! {
    /// The keys of `ank-server.conf`.
    pub struct ServerConfigFile for Args {
        flags {
            startup_manifest: PathBuf,
            state_file: PathBuf,
            address: SocketAddr,
            insecure: bool => tls.insecure,
            allow_any_agent_name: bool,
            strict_agent_names: bool,
            read_only_clients: Vec<String>,
            commander_clients: Vec<String>,
            crl_pem: PathBuf => tls.crl_pem,
            max_subscriptions_per_connection: usize,
            max_log_requests_per_connection: usize,
            heartbeat_interval_ms: u64,
            heartbeat_timeout_ms: u64,
            run_folder: PathBuf,
            shutdown_grace_ms: u64,
            resync_ready_s: u64,
            resync_not_ready_s: u64,
            job_stuck_after_s: u64,
            hold_dependents: bool,
            job_stop_on_failure: bool,
            job_history: usize,
            /// A duration such as `1h`; absent: the reaper is off.
            #[serde(deserialize_with = "ank_common::duration::optional")]
            ttl_after_finished: std::time::Duration,
            reaper_tick_ms: u64,
            /// Placement: `[metrics.<name>]` min, max, higher_is_better.
            #[serde(deserialize_with = "crate::placement::config::metrics_key")]
            metrics: Vec<(String, crate::placement::MetricRange)> => metric_ranges,
        }
        pem PathBuf => tls { ca_pem + ca_pem_content, crt_pem + crt_pem_content, key_pem + key_pem_content }
        tables {
            /// Placement: `[scheduler]` stickiness, reschedule_after, agent_loss_grace, seed.
            scheduler: PlacementKeys,
        }
        own by put_hooks {
            /// Ankaios' mutating hooks (beta), see `docs/mutating-hooks.md`.
            mutating_hooks: Vec<MutatingHook>,
        }
    }
}

ank_common::config_keys! {
    /// The `[scheduler]` table. Keys are snake_case; the camelCase spellings
    /// of the design (`rescheduleAfter`, `agentLossGrace`) are accepted too.
    pub struct PlacementKeys for Args {
        flags {
            #[serde(deserialize_with = "crate::placement::config::stickiness_key")]
            stickiness: f64 => scheduler_stickiness,
            #[serde(alias = "rescheduleAfter", deserialize_with = "ank_common::duration::optional")]
            reschedule_after: std::time::Duration => scheduler_reschedule_after,
            #[serde(alias = "agentLossGrace", deserialize_with = "ank_common::duration::optional")]
            agent_loss_grace: std::time::Duration => scheduler_agent_loss_grace,
            seed: u64 => scheduler_seed,
        }
    }
}

/// One `[[mutating_hooks]]` entry of Ankaios' server config.
// Ankaios: swdd~server-config-supports-mutating-hooks~1
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct MutatingHook {
    pub name: String,
    #[serde(default)]
    pub prio: u8,
    /// The hook's directory; default [`crate::hooks::DEFAULT_HOOKS_DIR`].
    pub path: Option<PathBuf>,
    /// Our addition: how long the hook may take; default 5000.
    pub timeout_ms: Option<u64>,
}

impl MutatingHook {
    /// The hook as the server runs it, with the defaults filled in.
    pub fn config(&self) -> crate::hooks::HookConfig {
        crate::hooks::HookConfig {
            name: self.name.clone(),
            prio: self.prio,
            path: self.path.clone().unwrap_or_else(|| PathBuf::from(crate::hooks::DEFAULT_HOOKS_DIR)),
            timeout: self.timeout_ms.map_or(crate::hooks::DEFAULT_TIMEOUT, std::time::Duration::from_millis),
        }
    }
}

/// The file's `[[mutating_hooks]]` (no flag sets them), with the defaults
/// of the keys they leave out.
fn put_hooks(args: &mut Args, _: &ArgMatches, hooks: Option<Vec<MutatingHook>>) {
    if let Some(hooks) = hooks {
        args.mutating_hooks = hooks.iter().map(MutatingHook::config).collect();
    }
}

/// Parses the process' command line (clap prints usage errors and exits)
/// and merges the config file into it. Returns the file used, if any, and
/// the warnings about its keys.
pub fn parse_args() -> Result<(Args, Loaded), ConfigFileError> {
    let matches = Args::command().get_matches();
    let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let loaded = apply(&mut args, &matches, Path::new(DEFAULT_SERVER_CONFIG))?;
    Ok((args, loaded))
}

/// Reads the config file `-x` names, else `default_path` if it exists, and
/// fills the values of `args` that came from neither flag nor environment.
pub fn apply(args: &mut Args, matches: &ArgMatches, default_path: &Path) -> Result<Loaded, ConfigFileError> {
    let explicit = args.server_config.clone();
    config_file::apply::<ServerConfigFile>(args, matches, explicit.as_deref(), &[default_path.to_path_buf()])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::tls::PemSource;
    use std::io::Write;

    fn conf(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn resolve_with(cmd: clap::Command, argv: &[&str], default: &Path) -> Result<Args, ConfigFileError> {
        let m = cmd.try_get_matches_from(std::iter::once("ank-server").chain(argv.iter().copied())).unwrap();
        let mut args = Args::from_arg_matches(&m).unwrap();
        apply(&mut args, &m, default).map(|_| args)
    }

    fn resolve(argv: &[&str], default: &Path) -> Result<Args, ConfigFileError> {
        resolve_with(Args::command(), argv, default)
    }

    const FULL: &str = "version = 'v1'\nstartup_manifest = '/m.yaml'\nstate_file = '/var/lib/s.json'\naddress = '0.0.0.0:4000'\ninsecure = true\n\
                        ca_pem = '/ca.pem'\ncrt_pem_content = 'CRT'\n";

    #[test]
    fn server_config_file_values_used_without_flags() {
        let f = conf(FULL);
        let a = resolve(&[], f.path()).unwrap();
        assert_eq!(a.startup_manifest, Some(PathBuf::from("/m.yaml")));
        assert_eq!(a.state_file, Some(PathBuf::from("/var/lib/s.json")));
        assert_eq!(a.address.to_string(), "0.0.0.0:4000");
        assert!(a.tls.insecure);
        assert_eq!(a.tls.ca_pem, Some(PathBuf::from("/ca.pem")));
        assert_eq!(a.tls.crt_pem_content.as_deref(), Some("CRT"));
        assert!(a.tls_sources().is_err(), "insecure with only some PEM items is refused, as in Ankaios");
        assert_eq!(a.tls_conflict(), Some(ank_common::tls::INSECURE_AND_SECURE));
        let f = conf(
            "version = 'v1'\nread_only_clients = ['viewer']\nallow_any_agent_name = true\n\
                      ca_pem = '/ca.pem'\ncrt_pem = '/s.pem'\nkey_pem_content = 'KEY'\n",
        );
        let a = resolve(&[], f.path()).unwrap();
        assert!(a.tls_sources().unwrap().is_some(), "all three items from the file");
        assert_eq!((a.read_only_clients, a.allow_any_agent_name), (vec!["viewer".to_owned()], true));
    }

    #[test]
    fn server_config_flags_beat_the_file() {
        let f = conf(FULL);
        let a = resolve(&["-a", "127.0.0.1:9", "-m", "/other.yaml", "--crt_pem", "/c.pem"], f.path()).unwrap();
        assert_eq!(a.address.to_string(), "127.0.0.1:9");
        assert_eq!(a.startup_manifest, Some(PathBuf::from("/other.yaml")));
        assert_eq!(a.tls.crt_pem, Some(PathBuf::from("/c.pem")));
        assert_eq!(a.tls.crt_pem_content, None, "the flag replaces the file's content too");
        assert!(a.tls.insecure, "keys without a flag still come from the file");
    }

    #[test]
    fn server_config_explicit_file_beats_default_and_must_exist() {
        let default = conf("version = 'v1'\naddress = '0.0.0.0:1'\n");
        let explicit = conf("version = 'v1'\naddress = '0.0.0.0:2'\n");
        let a = resolve(&["-x", explicit.path().to_str().unwrap()], default.path()).unwrap();
        assert_eq!(a.address.to_string(), "0.0.0.0:2");
        let e = resolve(&["-x", "/nonexistent/ank-server.conf"], default.path()).unwrap_err();
        assert_eq!(e.to_string(), "config file '/nonexistent/ank-server.conf' does not exist");
        let a = resolve(&[], Path::new("/nonexistent/default.conf")).unwrap();
        assert_eq!(a.address.to_string(), "127.0.0.1:25551", "a missing default file is fine");
    }

    #[test]
    fn server_config_env_beats_the_file() {
        // The flags' real variables are remapped to names no other test
        // uses; nextest runs each test in its own process. clap reads the
        // variables when `.env()` is called, so they are set first.
        // SAFETY: only this test reads or writes these variables.
        unsafe {
            std::env::set_var("ANKSERVER_TEST_CONFIG_FILE_INSECURE", "false");
            std::env::set_var("ANKSERVER_TEST_CONFIG_FILE_CA_PEM", "/env-ca.pem");
        }
        let cmd = Args::command()
            .mut_arg("insecure", |a| a.env("ANKSERVER_TEST_CONFIG_FILE_INSECURE"))
            .mut_arg("ca_pem", |a| a.env("ANKSERVER_TEST_CONFIG_FILE_CA_PEM"));
        let f = conf("version = 'v1'\ninsecure = true\nca_pem_content = 'CA'\naddress = '0.0.0.0:7'\n");
        let a = resolve_with(cmd, &[], f.path()).unwrap();
        assert!(!a.tls.insecure, "ANKSERVER_INSECURE=false beats insecure = true");
        assert_eq!(a.tls.ca_pem, Some(PathBuf::from("/env-ca.pem")));
        assert_eq!(a.tls.ca_pem_content, None);
        assert_eq!(a.address.to_string(), "0.0.0.0:7");
    }

    #[test]
    fn server_config_bad_files_name_file_key_and_line() {
        let f = conf("version = 'v1'\n\ninsecure = 'yes'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:3: key 'insecure': ", f.path().display())), "{e}");
        let f = conf("version = 'v1'\naddress = 'not an address'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: key 'address': ", f.path().display())), "{e}");
        let f = conf("address = '0.0.0.0:1'\n");
        let e = resolve(&[], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::MissingVersion { ref path } if path == &f.path().display().to_string()));
        let f = conf("version = 'v1'\nkey_pem = '/k'\nkey_pem_content = 'K'\n");
        let e = resolve(&[], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::PathAndContent { ref key, .. } if key == "key_pem"), "{e}");
    }

    // The job switches are off by default (as Ankaios: nothing held, no
    // stuck timeout) and come from the file or the flags.
    #[test]
    fn server_config_job_switches_are_opt_in_by_file_or_flag() {
        let off = resolve(&[], Path::new("/nonexistent")).unwrap().jobs();
        assert_eq!(off, crate::jobs::JobSettings::default());
        assert!(!off.hold_dependents && !off.stop_on_failure && off.stuck_after.is_none());
        let f = conf("version = 'v1'\nhold_dependents = true\njob_stop_on_failure = true\njob_stuck_after_s = 300\n");
        let on = resolve(&[], f.path()).unwrap().jobs();
        assert!(on.hold_dependents && on.stop_on_failure);
        assert_eq!(on.stuck_after, Some(std::time::Duration::from_secs(300)));
        let flags = resolve(&["--hold-dependents", "--job-stuck-after-s", "60"], Path::new("/nonexistent")).unwrap();
        let flags = flags.jobs();
        assert!(flags.hold_dependents && !flags.stop_on_failure);
        assert_eq!(flags.stuck_after, Some(std::time::Duration::from_secs(60)));
    }

    // [test of feature K7: the reaper's default ttl and tick by file, env and flag]
    #[test]
    fn server_config_reaper_keys_and_their_flags() {
        let f = conf("version = 'v1'\nttl_after_finished = '72h'\nreaper_tick_ms = 250\n");
        let reaper = resolve(&[], f.path()).unwrap().reaper();
        assert_eq!(reaper.default_ttl, Some(std::time::Duration::from_secs(72 * 3600)));
        assert_eq!(reaper.tick, std::time::Duration::from_millis(250));
        let a = resolve(&["--ttl-after-finished", "90s", "--reaper-tick-ms", "2000"], f.path()).unwrap();
        assert_eq!(a.reaper().default_ttl, Some(std::time::Duration::from_secs(90)));
        assert_eq!(a.reaper().tick, std::time::Duration::from_secs(2));
        let off = resolve(&[], Path::new("/nonexistent")).unwrap().reaper();
        assert_eq!(
            (off.default_ttl, off.tick),
            (None, std::time::Duration::from_secs(1)),
            "the reaper is off by default"
        );
        let f = conf("version = 'v1'\nttl_after_finished = 'soon'\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.contains(":2: key 'ttl_after_finished'"), "{e}");
        // SAFETY: only this test reads or writes this variable.
        unsafe { std::env::set_var("ANKSERVER_TEST_REAPER_TTL", "5m") };
        let cmd = Args::command().mut_arg("ttl_after_finished", |a| a.env("ANKSERVER_TEST_REAPER_TTL"));
        let f = conf("version = 'v1'\nttl_after_finished = '72h'\n");
        let a = resolve_with(cmd, &[], f.path()).unwrap();
        assert_eq!(a.reaper().default_ttl, Some(std::time::Duration::from_secs(300)), "env beats the file");
    }

    #[test]
    fn server_config_placement_tables_under_flags() {
        let f = conf(
            "version = 'v1'\n[scheduler]\nstickiness = 0.2\nrescheduleAfter = '30s'\nagent_loss_grace = '2m'\nseed = 42\n\
             [metrics.free_memory_mb]\nmin = 0\nmax = 8192\n[metrics.cpu_usage]\nmin = 0\nmax = 100\nhigherIsBetter = false\n",
        );
        let p = resolve(&[], f.path()).unwrap().placement();
        assert_eq!(
            (p.stickiness, p.reschedule_after.as_secs(), p.agent_loss_grace.as_secs(), p.seed),
            (0.2, 30, 120, 42)
        );
        assert_eq!((p.metrics["free_memory_mb"].max, p.metrics["cpu_usage"].higher_is_better), (8192.0, false));
        let p = resolve(&["--scheduler-seed", "7", "--metric-range", "load=0:1"], f.path()).unwrap().placement();
        assert_eq!(p.seed, 7, "the flag beats the file");
        assert_eq!(p.metrics["free_memory_mb"].max, 65536.0, "--metric-range replaces the file's table");
        let f = conf("version = 'v1'\n[metrics.x]\nmin = 5\nmax = 1\n");
        let e = resolve(&[], f.path()).unwrap_err().to_string();
        assert!(e.contains("key 'metrics.x'") && e.contains("metric 'x'") && e.contains("min < max"), "{e}");
        let f = conf("version = 'v1'\n[scheduler]\nreschedule_after = 'soon'\n");
        assert!(resolve(&[], f.path()).unwrap_err().to_string().contains("'soon'"));
    }

    /// The keys of Ankaios' `tests/resources/configs/ank-server_with_certificates_paths.conf`.
    const ANKAIOS_SERVER_CONF: &str = "version = 'v1'\naddress = '127.0.0.1:25551'\ninsecure = false\n\
        ca_pem = '''/tmp/.certs/ca.pem'''\ncrt_pem = '''/tmp/.certs/server.pem'''\nkey_pem = '''/tmp/.certs/server-key.pem'''\n";

    #[test]
    fn server_config_reads_ankaios_files() {
        let f = conf(ANKAIOS_SERVER_CONF);
        let a = resolve(&[], f.path()).unwrap();
        assert_eq!(a.address.to_string(), "127.0.0.1:25551");
        assert!(!a.tls.insecure);
        let tls = a.tls_sources().unwrap().expect("mTLS");
        assert_eq!(tls.key, PemSource::File("/tmp/.certs/server-key.pem".into()));
        // Ankaios' `ank-server.conf`: insecure with a startup manifest.
        let f = conf(
            "version = 'v1'\nstartup_manifest = 'tests/resources/configs/simple.yaml'\naddress = '127.0.0.1:25551'\n\
             insecure = true\n",
        );
        let a = resolve(&[], f.path()).unwrap();
        assert_eq!(a.startup_manifest, Some(PathBuf::from("tests/resources/configs/simple.yaml")));
        assert_eq!(a.tls_sources(), Ok(None));
    }

    #[test]
    fn server_config_unknown_keys_are_ignored_with_warnings_and_mutating_hooks_read() {
        let text = format!(
            "{ANKAIOS_SERVER_CONF}future_key = 1\n[[mutating_hooks]]\nname = 'validate-resources'\nprio = 10\n\
             path = '/opt/hooks'\n[[mutating_hooks]]\nname = 'auto-schedule'\n"
        );
        let f = conf(&text);
        let (file, warnings) = config_file::read::<ServerConfigFile>(f.path()).unwrap();
        assert_eq!(file.mutating_hooks.unwrap_or_default().len(), 2);
        let shown = f.path().display().to_string();
        assert_eq!(warnings, [format!("config file '{shown}': unknown key 'future_key' ignored")]);
        let m = Args::command().try_get_matches_from(["ank-server", "-x", &shown]).unwrap();
        let mut args = Args::from_arg_matches(&m).unwrap();
        let loaded = apply(&mut args, &m, Path::new("/nonexistent")).unwrap();
        assert_eq!((loaded.path.as_deref(), loaded.warnings.len()), (Some(f.path()), 1));
        let hooks = args.hooks();
        let first = crate::hooks::HookConfig {
            name: "validate-resources".into(),
            prio: 10,
            path: "/opt/hooks".into(),
            timeout: std::time::Duration::from_millis(5000),
        };
        let second = crate::hooks::HookConfig {
            name: "auto-schedule".into(),
            prio: 0,
            path: crate::hooks::DEFAULT_HOOKS_DIR.into(),
            timeout: std::time::Duration::from_millis(5000),
        };
        assert_eq!(hooks, [first, second], "defaults as in Ankaios, in file order (sorted when run)");
        let f = conf("version = 'v1'\n[[mutating_hooks]]\nname = 'x'\ntimeout_ms = 250\n");
        let (file, _) = config_file::read::<ServerConfigFile>(f.path()).unwrap();
        assert_eq!(file.mutating_hooks.unwrap_or_default()[0].config().timeout, std::time::Duration::from_millis(250));
        let f = conf("version = 'v1'\n[[mutating_hooks]]\nprio = 1\n");
        assert!(config_file::read::<ServerConfigFile>(f.path()).is_err(), "a hook needs a name");
        // As in Ankaios, a hook's priority must fit 0..=255.
        let f = conf("version = 'v1'\n[[mutating_hooks]]\nname = 'x'\nprio = 256\n");
        assert!(config_file::read::<ServerConfigFile>(f.path()).is_err());
    }

    #[test]
    fn server_config_example_parses() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/config/ank-server.conf");
        let a = resolve(&["-x", example.to_str().unwrap()], Path::new("/nonexistent")).unwrap();
        assert!(a.tls.insecure);
        assert!(a.startup_manifest.is_some());
        assert!(a.validate().is_ok());
        assert_eq!(a.placement().metrics["free_memory_mb"].max, 8192.0);
    }
}
