//! The config file of `ank` (`-x, --ank-config`, default the first that
//! exists of `$HOME/.config/ankaios/ank.conf` and `/etc/ankaios/ank.conf`):
//! its keys and the flags they sit under, for the loader in
//! [`ank_common::config_file`] (flag, then environment variable, then file,
//! then built-in default). As in Ankaios, the keys of the `[default]` table
//! may also stand at the top level and the other way round (`[default]`
//! wins when both have one).

use std::path::PathBuf;

use ank_common::config_file::{self, ConfigFileError, Loaded};
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::Cli;

/// Exit code of `ank` for a config file or connection settings that cannot
/// be used (Ankaios' 1).
pub const EXIT_BAD_CONFIG: u8 = 1;

/// System-wide config file, read when there is no user one.
pub const SYSTEM_ANK_CONFIG: &str = "/etc/ankaios/ank.conf";

ank_common::config_keys! {
    /// The keys of `ank.conf`, in its `[default]` table or, as Ankaios also
    /// reads them, at the top level.
    pub struct ServerContext for Cli {
        flags {
            /// Milliseconds to wait for each response of the server.
            response_timeout: u64 => response_timeout_ms,
            verbose: bool,
            quiet: bool,
            no_wait: bool,
            server_url: String,
            insecure: bool => tls.insecure,
            check_server_url_host: bool,
            crl_pem: std::path::PathBuf => tls.crl_pem,
        }
        pem PathBuf => tls { ca_pem + ca_pem_content, crt_pem + crt_pem_content, key_pem + key_pem_content }
    }
}

/// `ank.conf`: [`ServerContext`] at the top level and in `[default]`.
pub type AnkConfigFile = config_file::WithDefaultTable<ServerContext>;

/// The files tried without `-x`, in order: the user's, then the system's.
pub fn default_paths() -> Vec<PathBuf> {
    let user = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".config/ankaios/ank.conf"));
    user.into_iter().chain([PathBuf::from(SYSTEM_ANK_CONFIG)]).collect()
}

/// Parses the process' command line (clap prints usage errors and exits)
/// and merges the config file into it; also returns the warnings about the
/// file's keys.
pub fn parse_cli() -> Result<(Cli, Loaded), ConfigFileError> {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    resolve_wait(&mut cli, &matches).unwrap_or_else(|e| e.exit());
    let loaded = apply(&mut cli, &matches, &default_paths())?;
    Ok((cli, loaded))
}

/// `--wait` and `--no-wait` exclude each other. Given both on the command
/// line, or both in the environment, that is a usage error (exit 2) whose
/// usage line is the plain one (clap's own conflict check printed the flags
/// the environment had set as if they had been typed); one on the command
/// line beats the other from the environment.
pub fn resolve_wait(cli: &mut Cli, matches: &ArgMatches) -> Result<(), clap::Error> {
    use clap::parser::ValueSource;
    if !(cli.wait_job && cli.no_wait) {
        return Ok(());
    }
    let typed = |id: &str| matches!(matches.value_source(id), Some(ValueSource::CommandLine));
    match (typed("wait_job"), typed("no_wait")) {
        (true, false) => cli.no_wait = false,
        (false, true) => cli.wait_job = false,
        (true, true) | (false, false) => {
            let how = if typed("wait_job") { "" } else { " (ANK_WAIT and ANK_NO_WAIT are both set)" };
            return Err(Cli::command().error(
                clap::error::ErrorKind::ArgumentConflict,
                format!("the argument '--wait' cannot be used with '--no-wait'{how}"),
            ));
        }
    }
    Ok(())
}

/// Reads the config file `-x` names, else the first of `defaults` that
/// exists, and fills the values of `cli` that came from neither flag nor
/// environment. Returns the file used, if any, and the warnings.
pub fn apply(cli: &mut Cli, matches: &ArgMatches, defaults: &[PathBuf]) -> Result<Loaded, ConfigFileError> {
    let explicit = cli.ank_config.clone();
    config_file::apply::<AnkConfigFile>(cli, matches, explicit.as_deref(), defaults)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;
    use std::time::Duration;

    fn conf(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    fn resolve_with(cmd: clap::Command, argv: &[&str], defaults: &[PathBuf]) -> Result<Cli, ConfigFileError> {
        let m = cmd.try_get_matches_from(std::iter::once("ank").chain(argv.iter().copied())).unwrap();
        let mut cli = Cli::from_arg_matches(&m).unwrap();
        apply(&mut cli, &m, defaults).map(|_| cli)
    }

    fn resolve(argv: &[&str], default: &Path) -> Result<Cli, ConfigFileError> {
        resolve_with(Cli::command(), argv, &[default.to_path_buf()])
    }

    const FULL: &str = "version = 'v1'\nresponse_timeout = 100\nverbose = true\nno_wait = true\n\n\
                        [default]\nserver_url = 'http://10.0.0.1:25551'\ninsecure = true\ncrt_pem = '/c.pem'\n";

    #[test]
    fn ank_config_file_values_used_without_flags() {
        let f = conf(FULL);
        let cli = resolve(&["get", "agents"], f.path()).unwrap();
        assert_eq!(cli.response_timeout(), Duration::from_millis(100));
        assert!(cli.verbose && !cli.quiet && !cli.wait());
        assert_eq!(cli.tls.crt_pem.as_deref(), Some(Path::new("/c.pem")));
        assert_eq!(cli.server_url.as_deref(), Some("http://10.0.0.1:25551"));
        assert!(cli.tls.insecure);
        assert!(cli.resolved_server_url().is_err(), "insecure with only some PEM items is refused, as in Ankaios");
    }

    #[test]
    fn ank_config_flags_beat_the_file_also_after_the_subcommand() {
        let f = conf(FULL);
        let argv = ["-s", "http://h:1", "--crt_pem", "/flag.pem", "get", "agents", "--response-timeout", "5"];
        let cli = resolve(&argv, f.path()).unwrap();
        assert_eq!(cli.response_timeout_ms, 5);
        assert_eq!(cli.server_url.as_deref(), Some("http://h:1"));
        assert_eq!(cli.tls.crt_pem.as_deref(), Some(Path::new("/flag.pem")));
        assert!(cli.verbose, "keys without a flag still come from the file");
    }

    #[test]
    fn ank_config_env_beats_the_file() {
        // The flags' real variables are remapped to names no other test
        // uses; nextest runs each test in its own process. clap reads the
        // variables when `.env()` is called, so they are set first.
        // SAFETY: only this test reads or writes these variables.
        unsafe {
            std::env::set_var("ANK_TEST_CONFIG_FILE_SERVER_URL", "http://env:2");
            std::env::set_var("ANK_TEST_CONFIG_FILE_VERBOSE", "false");
        }
        let cmd = Cli::command()
            .mut_arg("server_url", |a| a.env("ANK_TEST_CONFIG_FILE_SERVER_URL"))
            .mut_arg("verbose", |a| a.env("ANK_TEST_CONFIG_FILE_VERBOSE"));
        let f = conf(FULL);
        let cli = resolve_with(cmd, &["get", "agents"], &[f.path().to_path_buf()]).unwrap();
        assert_eq!(cli.server_url.as_deref(), Some("http://env:2"));
        assert!(!cli.verbose, "ANK_VERBOSE=false beats verbose = true");
        assert_eq!(cli.response_timeout_ms, 100);
    }

    #[test]
    fn ank_config_first_existing_default_wins_and_explicit_must_exist() {
        let user = conf("version = 'v1'\nresponse_timeout = 1\n");
        let system = conf("version = 'v1'\nresponse_timeout = 2\n");
        let missing = PathBuf::from("/nonexistent/ank.conf");
        let both = [missing.clone(), user.path().to_path_buf(), system.path().to_path_buf()];
        assert_eq!(resolve_with(Cli::command(), &["get", "agents"], &both).unwrap().response_timeout_ms, 1);
        let none = resolve_with(Cli::command(), &["get", "agents"], std::slice::from_ref(&missing)).unwrap();
        assert_eq!(none.response_timeout_ms, 3000);
        let argv = ["get", "agents", "-x", system.path().to_str().unwrap()];
        assert_eq!(resolve_with(Cli::command(), &argv, &both).unwrap().response_timeout_ms, 2);
        let e = resolve(&["--ank-config", "/nonexistent/x.conf", "get", "agents"], user.path()).unwrap_err();
        assert_eq!(e.to_string(), "config file '/nonexistent/x.conf' does not exist");
    }

    /// The keys of Ankaios' `tests/resources/configs/ank.conf`.
    const ANKAIOS_ANK_CONF: &str = "version = 'v1'\nresponse_timeout = 3000  # milliseconds\nverbose = false\n\
        quiet = false\nno_wait = false\n[default]\nserver_url = 'https://127.0.0.1:25551'\ninsecure = false\n\
        ca_pem = '''/tmp/.certs/ca.pem'''\ncrt_pem = '''/tmp/.certs/cli.pem'''\nkey_pem = '''/tmp/.certs/cli-key.pem'''\n";

    #[test]
    fn ank_config_reads_ankaios_files_and_ignores_unknown_keys() {
        let f = conf(&format!("{ANKAIOS_ANK_CONF}server = 'x'\n"));
        let (_, warnings) = config_file::read::<AnkConfigFile>(f.path()).unwrap();
        assert_eq!(warnings, [format!("config file '{}': unknown key 'default.server' ignored", f.path().display())]);
        let cli = resolve(&["get", "agents"], f.path()).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "https://127.0.0.1:25551");
        assert_eq!(cli.tls.key_pem.as_deref(), Some(Path::new("/tmp/.certs/cli-key.pem")));
        assert!(cli.tls_sources().unwrap().is_some());
        assert_eq!(cli.response_timeout_ms, 3000);
    }

    #[test]
    fn ank_config_takes_default_keys_at_the_top_and_top_keys_in_default_as_ankaios() {
        let f = conf("version = 'v1'\nserver_url = 'http://top:1'\ninsecure = true\n[default]\nresponse_timeout = 7\n");
        let cli = resolve(&["get", "agents"], f.path()).unwrap();
        assert_eq!((cli.resolved_server_url().unwrap().as_str(), cli.response_timeout_ms), ("http://top:1", 7));
        let f = conf("version = 'v1'\nserver_url = 'http://top:1'\n[default]\nserver_url = 'http://default:2'\n");
        assert_eq!(
            resolve(&["-k", "get", "agents"], f.path()).unwrap().resolved_server_url().unwrap(),
            "http://default:2"
        );
    }

    #[test]
    fn ank_config_bad_files_name_file_key_and_line() {
        let f = conf("version = 'v1'\nresponse_timeout = '3s'\n");
        let e = resolve(&["get", "agents"], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: key 'response_timeout': ", f.path().display())), "{e}");
        let f = conf("quiet = true\n");
        let e = resolve(&["get", "agents"], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::MissingVersion { ref path } if path == &f.path().display().to_string()));
        let f = conf("version = 'v1'\n[default]\ncrt_pem = '/c'\ncrt_pem_content = 'C'\n");
        let e = resolve(&["get", "agents"], f.path()).unwrap_err();
        assert!(matches!(e, ConfigFileError::PathAndContent { ref key, .. } if key == "default.crt_pem"), "{e}");
    }

    #[test]
    fn ank_config_example_parses() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/config/ank.conf");
        let cli = resolve(&["-x", example.to_str().unwrap(), "get", "agents"], Path::new("/nonexistent")).unwrap();
        assert_eq!(cli.resolved_server_url().unwrap(), "http://127.0.0.1:25551");
        assert_eq!(cli.response_timeout_ms, 3000);
    }
}
