//! The server's state file (`--state-file`): the desired state as users
//! wrote it (workloads and configs, templates unrendered), saved after every
//! accepted change and loaded at start, so that a restarted server hands its
//! agents exactly what they ran before. The file is JSON, which is also YAML:
//! `ank apply FILE` accepts it as a manifest.
//!
//! Writes are atomic: a temporary file in the same folder is written,
//! flushed to disk and renamed over the old one, then the folder is synced.
//! A crash at any point leaves either the old or the new state, never a
//! mixture. The file is readable by its owner only, as configs may carry
//! secrets.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ank_common::State;

use crate::desired_state::DesiredState;

/// Why the state file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("cannot read state file '{path}': {source}")]
    Read { path: String, source: std::io::Error },
    #[error(
        "state file '{path}' is not a valid saved state ({reason}); fix or move it away to start from the startup manifest"
    )]
    Invalid { path: String, reason: String },
    #[error("cannot write state file '{path}': {source}")]
    Write { path: String, source: std::io::Error },
}

/// Where the desired state is kept across restarts.
#[derive(Debug, Clone)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn label(&self) -> String {
        self.path.display().to_string()
    }

    /// The saved state, `None` if the file does not exist. A file that
    /// exists but cannot be read or is not a valid state is an error: the
    /// server must not start and overwrite it with something else.
    pub fn load(&self) -> Result<Option<DesiredState>, StateFileError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(StateFileError::Read { path: self.label(), source }),
        };
        let invalid = |reason: String| StateFileError::Invalid { path: self.label(), reason };
        let state: State = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        DesiredState::new(state).map(Some).map_err(|e| invalid(e.to_string()))
    }

    /// Replaces the saved state with `state`, atomically and durably.
    pub fn save(&self, state: &State) -> Result<(), StateFileError> {
        let write_err = |source| StateFileError::Write { path: self.label(), source };
        let mut text = serde_json::to_vec_pretty(state).map_err(|e| write_err(std::io::Error::other(e)))?;
        text.push(b'\n');
        write_atomically(&self.path, &text).map_err(write_err)
    }

    /// The file of the `${seq:N}` allocations that goes with this state
    /// file: the same folder and name with the extension `seq.json`
    /// (`state.json` -> `state.seq.json`).
    pub fn seq_path(&self) -> PathBuf {
        self.path.with_extension("seq.json")
    }
}

/// Replaces `path` with `bytes`, atomically and durably: a temporary file
/// in the same folder is written, synced and renamed over it, then the
/// folder is synced. The temporary file has a name no one can predict and
/// is created new (`O_EXCL`, never through an existing file or symlink),
/// owner-only (0600).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (tmp, mut file) = create_temporary(path)?;
    let written = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename itself is durable only once the folder is synced.
        File::open(folder(path))?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A new file next to `path` named `.<name>.<random>.tmp`; a name that is
/// taken is never reused or followed, another one is drawn.
fn create_temporary(path: &Path) -> std::io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = temporary_path(path, random_suffix());
        match OpenOptions::new()
            .write(true)
            // O_CREAT|O_EXCL: fails on any existing entry, a symlink too.
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// 64 unpredictable bits: the standard library seeds each `RandomState`
/// from the operating system's random source.
fn random_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

fn folder(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn temporary_path(path: &Path, suffix: u64) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{suffix:016x}.tmp"));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn state(yaml: &str) -> State {
        ank_common::manifest::parse_manifest("test", yaml).unwrap()
    }

    const MANIFEST: &str = "apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: \"{{place.agent}}\"
    configs:
      place: placement
    runtimeConfig: |
      image: localhost/busybox:latest
configs:
  placement:
    agent: agent_A
";

    #[test]
    fn a_saved_state_loads_back_identical_and_unrendered() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        assert!(file.load().unwrap().is_none(), "no file yet: nothing saved");
        let s = state(MANIFEST);
        file.save(&s).unwrap();
        let loaded = file.load().unwrap().unwrap();
        assert_eq!(loaded.state, s);
        assert_eq!(loaded.state.workloads["web"].agent, "{{place.agent}}");
        assert_eq!(loaded.rendered.workloads["web"].agent, "agent_A");
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("state.json")], "no temporary file is left");
        // It is a manifest too.
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert_eq!(state(&text), s);
    }

    #[test]
    fn the_temporary_file_is_new_unpredictable_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        // A local user plants the names a predictable writer would use.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        for planted in ["state.json.tmp", ".state.json.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.path().join(planted)).unwrap();
        }
        file.save(&state(MANIFEST)).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the symlink was not followed");
        assert!(std::fs::symlink_metadata(file.path()).unwrap().file_type().is_file(), "not a planted symlink");
        assert_eq!(file.load().unwrap().unwrap().state, state(MANIFEST));
        // Two names drawn for the same file differ.
        let a = temporary_path(file.path(), random_suffix());
        let b = temporary_path(file.path(), random_suffix());
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(dir.path()), "in the same folder, for an atomic rename");
        // A taken name is not reused: create_new refuses it.
        let (taken, _f) = create_temporary(file.path()).unwrap();
        let e = OpenOptions::new().write(true).create_new(true).open(&taken).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        let mode = std::fs::metadata(&taken).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_save_replaces_the_whole_previous_state() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        file.save(&state(MANIFEST)).unwrap();
        let empty = State { api_version: "v1".into(), ..Default::default() };
        file.save(&empty).unwrap();
        assert_eq!(file.load().unwrap().unwrap().state, empty);
    }

    #[test]
    fn a_broken_or_unreadable_state_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{\"apiVersion\": \"v1\", \"workloads\": ").unwrap();
        let e = StateFile::new(&path).load().unwrap_err().to_string();
        assert!(e.starts_with(&format!("state file '{}' is not a valid saved state (", path.display())), "{e}");
        std::fs::write(&path, "{\"apiVersion\": \"v1\", \"workloads\": {\"w\": {\"runtime\": \"podman\", \"agent\": \"A\", \"runtimeConfig\": \"\", \"configs\": {\"c\": \"missing\"}}}}").unwrap();
        let e = StateFile::new(&path).load().unwrap_err().to_string();
        assert!(e.contains("config item 'missing', which does not exist"), "{e}");
        let e = StateFile::new(dir.path()).load().unwrap_err().to_string();
        assert!(e.starts_with("cannot read state file"), "{e}");
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_the_old_state() {
        let dir = tempfile::tempdir().unwrap();
        let missing = StateFile::new(dir.path().join("no-such-dir").join("state.json"));
        let e = missing.save(&state(MANIFEST)).unwrap_err().to_string();
        assert!(e.starts_with("cannot write state file") && e.contains("no-such-dir"), "{e}");
    }
}
