//! The config file of `ank` (`-x, --ank-config`, default the first that
//! exists of `$HOME/.config/ankaios/ank.conf` and `/etc/ankaios/ank.conf`):
//! its keys, and merging them into the parsed [`Cli`] with the precedence:
//! flag, then environment variable, then file, then built-in default. A
//! value is taken from the file only when clap reports that the flag was
//! neither on the command line nor in the environment.

use std::path::{Path, PathBuf};

use ank_common::config_file::{self, ConfigFileError, fill, fill_pem};
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use serde::Deserialize;

use crate::cli::Cli;

/// Exit code of `ank` for a config file that cannot be used, like a usage error.
pub const EXIT_BAD_CONFIG: u8 = 2;

/// System-wide config file, read when there is no user one.
pub const SYSTEM_ANK_CONFIG: &str = "/etc/ankaios/ank.conf";

/// The keys of `ank.conf`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnkConfigFile {
    /// Checked by [`config_file::parse`]; always `v1`.
    pub version: String,
    /// Milliseconds to wait for each response of the server.
    pub response_timeout: Option<u64>,
    pub verbose: Option<bool>,
    pub quiet: Option<bool>,
    pub no_wait: Option<bool>,
    /// The `[default]` table: how to reach the server.
    pub default: Option<ServerContext>,
}

/// The `[default]` table of `ank.conf`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerContext {
    pub server_url: Option<String>,
    pub insecure: Option<bool>,
    pub ca_pem: Option<String>,
    pub crt_pem: Option<String>,
    pub key_pem: Option<String>,
    pub ca_pem_content: Option<ank_common::tls::PemText>,
    pub crt_pem_content: Option<ank_common::tls::PemText>,
    pub key_pem_content: Option<ank_common::tls::PemText>,
}

/// The files tried without `-x`, in order: the user's, then the system's.
pub fn default_paths() -> Vec<PathBuf> {
    let user = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".config/ankaios/ank.conf"));
    user.into_iter().chain([PathBuf::from(SYSTEM_ANK_CONFIG)]).collect()
}

/// Parses the process' command line (clap prints usage errors and exits)
/// and merges the config file into it.
pub fn parse_cli() -> Result<Cli, ConfigFileError> {
    let matches = Cli::command().get_matches();
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    apply(&mut cli, &matches, &default_paths())?;
    Ok(cli)
}

/// Reads the config file `-x` names, else the first of `defaults` that
/// exists, and fills the values of `cli` that came from neither flag nor
/// environment. Returns the file used, if any.
pub fn apply(cli: &mut Cli, matches: &ArgMatches, defaults: &[PathBuf]) -> Result<Option<PathBuf>, ConfigFileError> {
    let Some(path) = config_file::choose_path(cli.ank_config.as_deref(), defaults, Path::exists)? else {
        return Ok(None);
    };
    let file = read(&path)?;
    merge(cli, matches, file);
    Ok(Some(path))
}

/// Reads and checks one config file.
pub fn read(path: &Path) -> Result<AnkConfigFile, ConfigFileError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: label.clone(), source })?;
    let file: AnkConfigFile = config_file::parse(&label, &text)?;
    if let Some(d) = &file.default {
        config_file::check_path_or_content(&label, "default.ca_pem", d.ca_pem.is_some(), d.ca_pem_content.is_some())?;
        config_file::check_path_or_content(
            &label,
            "default.crt_pem",
            d.crt_pem.is_some(),
            d.crt_pem_content.is_some(),
        )?;
        config_file::check_path_or_content(
            &label,
            "default.key_pem",
            d.key_pem.is_some(),
            d.key_pem_content.is_some(),
        )?;
    }
    Ok(file)
}

fn merge(cli: &mut Cli, m: &ArgMatches, file: AnkConfigFile) {
    fill(&mut cli.response_timeout_ms, file.response_timeout, m, "response_timeout_ms");
    fill(&mut cli.verbose, file.verbose, m, "verbose");
    fill(&mut cli.quiet, file.quiet, m, "quiet");
    fill(&mut cli.no_wait, file.no_wait, m, "no_wait");
    let Some(d) = file.default else { return };
    fill(&mut cli.server_url, d.server_url.map(Some), m, "server_url");
    fill(&mut cli.insecure, d.insecure, m, "insecure");
    // A PEM given by flag or environment replaces the file's path and content.
    fill_pem((&mut cli.ca_pem, &mut cli.ca_pem_content), (d.ca_pem, d.ca_pem_content), m, "ca_pem");
    fill_pem((&mut cli.crt_pem, &mut cli.crt_pem_content), (d.crt_pem, d.crt_pem_content), m, "crt_pem");
    fill_pem((&mut cli.key_pem, &mut cli.key_pem_content), (d.key_pem, d.key_pem_content), m, "key_pem");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
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
        assert_eq!(cli.crt_pem.as_deref(), Some("/c.pem"));
        assert_eq!(cli.resolved_server_url().unwrap(), "http://10.0.0.1:25551");
    }

    #[test]
    fn ank_config_flags_beat_the_file_also_after_the_subcommand() {
        let f = conf(FULL);
        let argv = ["-s", "http://h:1", "--crt_pem", "/flag.pem", "get", "agents", "--response-timeout", "5"];
        let cli = resolve(&argv, f.path()).unwrap();
        assert_eq!(cli.response_timeout_ms, 5);
        assert_eq!(cli.resolved_server_url().unwrap(), "http://h:1");
        assert_eq!(cli.crt_pem.as_deref(), Some("/flag.pem"));
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
        assert_eq!(cli.resolved_server_url().unwrap(), "http://env:2");
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

    #[test]
    fn ank_config_bad_files_name_file_key_and_line() {
        let f = conf("version = 'v1'\n[default]\nserver_url = 'u'\nserver = 'x'\n");
        let e = resolve(&["get", "agents"], f.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:4: key 'default.server': unknown field", f.path().display())), "{e}");
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
