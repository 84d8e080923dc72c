//! The parts of the TOML config files of `ank-server`, `ank-agent` and `ank`
//! that all three share: choosing which file to read, checking the
//! mandatory `version = 'v1'`, deserializing into a binary's own struct,
//! errors that name the file, the line and the key, and warnings for keys
//! the binary does not know. As in Ankaios, an unknown key never stops a
//! binary (it is ignored, with a warning naming file and key); a known key
//! with an invalid value does. Each binary describes its keys with
//! [`config_keys!`](crate::config_keys) (`describe.rs`, `keys.rs`); one
//! loader (`load.rs`) reads the file and fills the binary's parsed command
//! line from it.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;

mod default_table;
mod describe;
mod keys;
mod load;

pub use clap::ArgMatches;
pub use default_table::WithDefaultTable;
pub use keys::{ConfigKeys, Slot, arg_id, fill, fill_pem, given};
pub use load::{apply, read};

/// The only config file version this release reads.
pub const CONFIG_VERSION: &str = "v1";

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// A file given on the command line does not exist.
    #[error("config file '{path}' does not exist")]
    NotFound { path: String },
    /// The file exists but cannot be read.
    #[error("cannot read config file '{path}': {source}")]
    Read { path: String, source: std::io::Error },
    /// A syntax error, an unknown key or a value of the wrong type.
    #[error("{path}:{line}: {}{message}", key_prefix(.key))]
    Invalid { path: String, line: usize, key: Option<String>, message: String },
    /// The file has no `version` key.
    #[error("{path}: missing mandatory key 'version' (expected version = '{CONFIG_VERSION}')")]
    MissingVersion { path: String },
    /// The `version` key has another value than [`CONFIG_VERSION`].
    #[error("{path}:{line}: key 'version': unsupported version {found}, expected '{CONFIG_VERSION}'")]
    BadVersion { path: String, line: usize, found: String },
    /// A file and its content are both given for the same item.
    #[error("{path}: '{key}' and '{key}_content' are both set; give the file or its content, not both")]
    PathAndContent { path: String, key: String },
}

fn key_prefix(key: &Option<String>) -> String {
    key.as_ref().map(|k| format!("key '{k}': ")).unwrap_or_default()
}

/// Which file to read: `explicit` (from `-x`) must exist; without it the
/// first of `defaults` that exists, or none. `exists` is the file system
/// check, injected so this stays free of I/O.
pub fn choose_path(
    explicit: Option<&Path>,
    defaults: &[PathBuf],
    exists: impl Fn(&Path) -> bool,
) -> Result<Option<PathBuf>, ConfigFileError> {
    match explicit {
        Some(path) if exists(path) => Ok(Some(path.to_path_buf())),
        Some(path) => Err(ConfigFileError::NotFound { path: path.display().to_string() }),
        None => Ok(defaults.iter().find(|p| exists(p)).cloned()),
    }
}

/// Only the `version` key, with its position, to check it before the
/// binary's own struct rejects anything else.
#[derive(Deserialize)]
struct VersionProbe {
    version: Option<toml::Spanned<toml::Value>>,
}

/// Parses the text of config file `path` into `T` after checking its
/// `version` (which `T` may leave out: it is the loader's key).
pub fn parse<T: DeserializeOwned>(path: &str, text: &str) -> Result<T, ConfigFileError> {
    let probe: VersionProbe = toml::from_str(text).map_err(|e| invalid(path, text, &e, false))?;
    let Some(version) = probe.version else {
        return Err(ConfigFileError::MissingVersion { path: path.to_owned() });
    };
    if version.get_ref().as_str() != Some(CONFIG_VERSION) {
        return Err(ConfigFileError::BadVersion {
            path: path.to_owned(),
            line: line_of(text, version.span().start),
            found: version.get_ref().to_string(),
        });
    }
    toml::from_str(text).map_err(|e| invalid(path, text, &e, true))
}

/// A config file as read: its path (none when no file was used) and the
/// warnings about keys that were ignored, to be logged once logging runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub path: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// Like [`parse`], and also the warnings for every key of the file that `T`
/// does not know (ignored, as Ankaios ignores them).
pub fn parse_lenient<T: DeserializeOwned>(path: &str, text: &str) -> Result<(T, Vec<String>), ConfigFileError> {
    let (value, unknown) = parse_with_unknown_keys(path, text)?;
    Ok((value, unknown.iter().map(|key| unknown_key_warning(path, key)).collect()))
}

/// Like [`parse`], and also the dotted keys of the file that `T` does not
/// know, but `version` (the loader's key, which `T` may leave out).
fn parse_with_unknown_keys<T: DeserializeOwned>(path: &str, text: &str) -> Result<(T, Vec<String>), ConfigFileError> {
    let value: T = parse(path, text)?;
    Ok((value, unknown_keys::<T>(text).into_iter().filter(|key| key != "version").collect()))
}

/// The warning for a key of config file `path` that is not known.
pub fn unknown_key_warning(path: &str, key: &str) -> String {
    format!("config file '{path}': unknown key '{key}' ignored")
}

/// The dotted keys of `text` that deserializing into `T` skips. `text` must
/// already have parsed into `T`.
fn unknown_keys<T: DeserializeOwned>(text: &str) -> Vec<String> {
    let Ok(value) = toml::from_str::<toml::Value>(text) else { return Vec::new() };
    let mut unknown = Vec::new();
    let _: Result<T, _> =
        serde_ignored::deserialize(value, |p| unknown.push(crate::manifest::path_segments(&p).join(".")));
    unknown
}

/// Fails when both the file `key` and its `<key>_content` are set.
pub fn check_path_or_content(path: &str, key: &str, has_path: bool, has_content: bool) -> Result<(), ConfigFileError> {
    if has_path && has_content {
        return Err(ConfigFileError::PathAndContent { path: path.to_owned(), key: key.to_owned() });
    }
    Ok(())
}

fn invalid(path: &str, text: &str, err: &toml::de::Error, with_key: bool) -> ConfigFileError {
    let span = err.span().unwrap_or(0..0);
    ConfigFileError::Invalid {
        path: path.to_owned(),
        line: line_of(text, span.start),
        key: if with_key { key_at(text, span) } else { None },
        message: err.message().trim_end().to_owned(),
    }
}

/// 1-based line of byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

/// The dotted key an error span points into: the key of its `key = value`
/// line (or of the nearest one above, for values spanning lines), prefixed
/// by the enclosing `[table]`. A span on a table header names the table.
fn key_at(text: &str, span: Range<usize>) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let at = line_of(text, span.start).saturating_sub(1).min(lines.len().saturating_sub(1));
    let header = |line: &str| {
        let line = line.trim();
        line.starts_with('[').then(|| line.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    };
    if let Some(table) = lines.get(at).and_then(|l| header(l)) {
        return Some(table);
    }
    let key_line = (0..=at).rev().find_map(|i| lines[i].split_once('=').map(|(k, _)| (i, k)))?;
    let key = key_line.1.trim().trim_matches(|c| c == '"' || c == '\'').to_owned();
    match (0..key_line.0).rev().find_map(|i| header(lines[i])) {
        Some(table) => Some(format!("{table}.{key}")),
        None => Some(key),
    }
}

/// The default run folder of both daemons: `$TMPDIR/ankaios`, or
/// `/tmp/ankaios` without TMPDIR.
pub fn default_run_folder() -> PathBuf {
    std::env::var_os("TMPDIR")
        .filter(|t| !t.is_empty())
        .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
        .join("ankaios")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Sample {
        version: String,
        insecure: Option<bool>,
        port: Option<u16>,
        default: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        server_url: Option<String>,
    }

    fn err(text: &str) -> String {
        parse::<Sample>("/etc/x.conf", text).unwrap_err().to_string()
    }

    #[test]
    fn config_file_parses_a_valid_file() {
        let s: Sample = parse("f", "version = 'v1'\ninsecure = true\n[default]\nserver_url = 'http://h:1'\n").unwrap();
        assert_eq!(s.insecure, Some(true));
        assert_eq!(s.default.and_then(|d| d.server_url).as_deref(), Some("http://h:1"));
    }

    #[test]
    fn config_file_unknown_keys_are_ignored_with_a_warning_naming_file_and_key() {
        let text = "version = 'v1'\n\ninsecur = true\n[default]\nserver_url = 'u'\ntimeout = 3\n[extra]\nx = 1\n";
        let (s, mut warnings): (Sample, Vec<String>) = parse_lenient("/etc/x.conf", text).unwrap();
        warnings.sort();
        assert_eq!(s.default.and_then(|d| d.server_url).as_deref(), Some("u"));
        assert_eq!(
            warnings,
            [
                "config file '/etc/x.conf': unknown key 'default.timeout' ignored",
                "config file '/etc/x.conf': unknown key 'extra' ignored",
                "config file '/etc/x.conf': unknown key 'insecur' ignored",
            ]
        );
        let (_, none): (Sample, _) = parse_lenient("f", "version = 'v1'\ninsecure = true\n").unwrap();
        assert!(none.is_empty(), "{none:?}");
        // An invalid value of a known key is still an error.
        let e = parse_lenient::<Sample>("/etc/x.conf", "version = 'v1'\nwhatever = 1\ninsecure = 'yes'\n").unwrap_err();
        assert!(e.to_string().starts_with("/etc/x.conf:3: key 'insecure': "), "{e}");
    }

    #[test]
    fn config_file_wrong_type_names_line_and_key() {
        let e = err("version = 'v1'\ninsecure = 'yes'\n");
        assert!(e.starts_with("/etc/x.conf:2: key 'insecure': "), "{e}");
        assert!(e.contains("bool"), "{e}");
        let e = err("version = 'v1'\nport = 70000\n");
        assert!(e.starts_with("/etc/x.conf:2: key 'port': "), "{e}");
    }

    #[test]
    fn config_file_syntax_error_names_line() {
        let e = err("version = 'v1'\ninsecure = \n");
        assert!(e.starts_with("/etc/x.conf:2: "), "{e}");
    }

    #[test]
    fn config_file_version_is_mandatory_and_must_be_v1() {
        let e = parse::<Sample>("a.conf", "insecure = true\n").unwrap_err();
        assert!(matches!(e, ConfigFileError::MissingVersion { .. }), "{e}");
        assert!(e.to_string().contains("a.conf") && e.to_string().contains("version"), "{e}");
        let e = err("insecure = true\nversion = 'v2'\n");
        assert_eq!(e, "/etc/x.conf:2: key 'version': unsupported version \"v2\", expected 'v1'");
        assert!(err("version = 1\n").contains("unsupported version 1"));
    }

    #[test]
    fn config_file_path_and_content_conflict() {
        assert!(check_path_or_content("f", "ca_pem", true, false).is_ok());
        let e = check_path_or_content("f", "ca_pem", true, true).unwrap_err().to_string();
        assert_eq!(e, "f: 'ca_pem' and 'ca_pem_content' are both set; give the file or its content, not both");
    }

    #[test]
    fn config_file_path_choice() {
        let defaults = [PathBuf::from("/home/conf"), PathBuf::from("/etc/conf")];
        let chosen = choose_path(None, &defaults, |p| p == Path::new("/etc/conf")).unwrap();
        assert_eq!(chosen, Some(PathBuf::from("/etc/conf")));
        assert_eq!(choose_path(None, &defaults, |_| true).unwrap(), Some(PathBuf::from("/home/conf")));
        assert_eq!(choose_path(None, &defaults, |_| false).unwrap(), None);
        let e = choose_path(Some(Path::new("/x.conf")), &defaults, |_| false).unwrap_err();
        assert_eq!(e.to_string(), "config file '/x.conf' does not exist");
    }
}
