//! Where podman keeps its runtime files, read from `containers.conf` the
//! way podman reads it: the `[engine]` keys `tmp_dir` (exit files live in
//! `<tmp_dir>/exits`) and `events_logfile_path` (the event log of the
//! `file` events backend, by default `<tmp_dir>/events/events.log`). Later
//! files override earlier ones key by key; `CONTAINERS_CONF` names the only
//! file to read and `CONTAINERS_CONF_OVERRIDE` one read last. Nothing here
//! asks podman: `podman info` does not print these paths.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The containers.conf keys the agent needs; `None`: not set anywhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineSettings {
    pub tmp_dir: Option<PathBuf>,
    pub events_logfile_path: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfFile {
    #[serde(default)]
    engine: EngineSection,
}

#[derive(Debug, Default, Deserialize)]
struct EngineSection {
    tmp_dir: Option<PathBuf>,
    events_logfile_path: Option<PathBuf>,
}

/// Whose podman this is: root's or a user's (rootless), with the user's
/// runtime and config folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodmanUser {
    Root,
    Rootless { runtime_dir: PathBuf, config_home: Option<PathBuf> },
}

impl PodmanUser {
    /// The user this process runs as, from its uid and environment.
    pub fn current() -> Self {
        let uid = nix::unistd::geteuid();
        if uid.is_root() {
            return Self::Root;
        }
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let runtime_dir = env("XDG_RUNTIME_DIR").unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
        let config_home = env("XDG_CONFIG_HOME").or_else(|| env("HOME").map(|h| h.join(".config")));
        Self::Rootless { runtime_dir, config_home }
    }

    /// podman's default tmp dir for this user.
    fn default_tmp_dir(&self) -> PathBuf {
        match self {
            Self::Root => PathBuf::from("/run/libpod"),
            Self::Rootless { runtime_dir, .. } => runtime_dir.join("libpod/tmp"),
        }
    }
}

impl EngineSettings {
    /// Applies one file's text over these settings; a file that is no
    /// valid TOML changes nothing (podman would refuse to start with it).
    pub fn apply(&mut self, text: &str) -> Result<(), toml::de::Error> {
        let file: ConfFile = toml::from_str(text)?;
        if file.engine.tmp_dir.is_some() {
            self.tmp_dir = file.engine.tmp_dir;
        }
        if file.engine.events_logfile_path.is_some() {
            self.events_logfile_path = file.engine.events_logfile_path;
        }
        Ok(())
    }

    /// The settings of `files`, applied in order (missing files skipped).
    pub fn read(files: &[PathBuf]) -> Self {
        let mut settings = Self::default();
        for path in files {
            let Ok(text) = std::fs::read_to_string(path) else { continue };
            if let Err(e) = settings.apply(&text) {
                tracing::warn!("ignoring '{}', which is no valid containers.conf: {e}", path.display());
            }
        }
        settings
    }

    /// The settings podman of `user` uses on this host.
    pub fn load(user: &PodmanUser) -> Self {
        let files = config_files(
            user,
            std::env::var_os("CONTAINERS_CONF").map(PathBuf::from),
            std::env::var_os("CONTAINERS_CONF_OVERRIDE").map(PathBuf::from),
        );
        Self::read(&files)
    }

    /// podman's tmp dir (exit files, the default event log).
    pub fn tmp_dir(&self, user: &PodmanUser) -> PathBuf {
        self.tmp_dir.clone().unwrap_or_else(|| user.default_tmp_dir())
    }

    /// The event log of the `file` events backend.
    pub fn events_log(&self, user: &PodmanUser) -> PathBuf {
        self.events_logfile_path.clone().unwrap_or_else(|| self.tmp_dir(user).join("events/events.log"))
    }
}

/// The `*.conf` files of folder `dir`, sorted by name.
fn drop_ins(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "conf")).collect();
    files.sort();
    files
}

/// The containers.conf files podman of `user` reads, in order.
pub fn config_files(user: &PodmanUser, only: Option<PathBuf>, last: Option<PathBuf>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(only) = only {
        files.push(only);
    } else {
        let mut bases = vec![PathBuf::from("/usr/share/containers"), PathBuf::from("/etc/containers")];
        if let PodmanUser::Rootless { config_home: Some(home), .. } = user {
            bases.push(home.join("containers"));
        }
        for base in bases {
            files.push(base.join("containers.conf"));
            files.extend(drop_ins(&base.join("containers.conf.d")));
        }
    }
    files.extend(last);
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOTLESS: fn() -> PodmanUser =
        || PodmanUser::Rootless { runtime_dir: "/run/user/1000".into(), config_home: Some("/home/u/.config".into()) };

    #[test]
    fn containers_conf_defaults_are_podmans() {
        let none = EngineSettings::default();
        assert_eq!(none.events_log(&PodmanUser::Root), PathBuf::from("/run/libpod/events/events.log"));
        assert_eq!(none.tmp_dir(&PodmanUser::Root), PathBuf::from("/run/libpod"));
        assert_eq!(none.events_log(&ROOTLESS()), PathBuf::from("/run/user/1000/libpod/tmp/events/events.log"));
    }

    #[test]
    fn containers_conf_later_files_override_key_by_key() {
        let mut s = EngineSettings::default();
        s.apply("[engine]\n#events_logfile_path=\"\"\nevents_logger = \"file\"\n").unwrap();
        assert_eq!(s, EngineSettings::default());
        s.apply("[engine]\ntmp_dir = \"/var/run/pm\"\n").unwrap();
        assert_eq!(s.events_log(&PodmanUser::Root), PathBuf::from("/var/run/pm/events/events.log"));
        s.apply("[containers]\nlog_size_max = 1\n[engine]\nevents_logfile_path = \"/var/log/podman-events.log\"\n")
            .unwrap();
        assert_eq!(s.events_log(&PodmanUser::Root), PathBuf::from("/var/log/podman-events.log"));
        assert_eq!(s.tmp_dir(&PodmanUser::Root), PathBuf::from("/var/run/pm"), "kept from the earlier file");
        assert!(s.apply("[engine\n").is_err());
    }

    #[test]
    fn containers_conf_files_are_read_in_podmans_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.conf"), dir.path().join("b.conf"));
        std::fs::write(&a, "[engine]\nevents_logfile_path = \"/a\"\ntmp_dir = \"/t\"\n").unwrap();
        std::fs::write(&b, "[engine]\nevents_logfile_path = \"/b\"\n").unwrap();
        let missing = dir.path().join("missing.conf");
        let s = EngineSettings::read(&[a.clone(), missing, b.clone()]);
        assert_eq!(s.events_logfile_path, Some(PathBuf::from("/b")));
        assert_eq!(s.tmp_dir, Some(PathBuf::from("/t")));

        assert_eq!(config_files(&PodmanUser::Root, Some(a.clone()), Some(b.clone())), [a, b]);
        let root = config_files(&PodmanUser::Root, None, None);
        assert_eq!(root[0], PathBuf::from("/usr/share/containers/containers.conf"));
        assert!(root.contains(&PathBuf::from("/etc/containers/containers.conf")));
        let user = config_files(&ROOTLESS(), None, None);
        assert!(user.contains(&PathBuf::from("/home/u/.config/containers/containers.conf")));
    }
}
