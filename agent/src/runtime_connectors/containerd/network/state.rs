//! What a container's CNI DEL needs, kept across agent restarts in
//! `<state_dir>/<container_id>.json`, and the container's pinned network
//! namespace `<state_dir>/<container_id>.netns`.
//!
//! The namespace is pinned (bind-mounted, as `ip netns add` and
//! containerd's CRI do) at ADD, because the task's `/proc/<pid>/ns/net`
//! is gone once the task died, and a DEL without the namespace leaves
//! behind what the plugins can only find inside it (the bridge plugin of
//! containernetworking-plugins 1.1 removes its masquerade rules only when
//! it finds the container's addresses in the namespace). A pinned path is
//! also safe from pid reuse, which `/proc/<pid>` of a dead task is not.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::NetworkError;

/// A container's attachment as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct State {
    /// The network configuration list ADD ran (DEL runs the same one,
    /// whatever the agent's configuration is by then).
    pub conflist: Value,
    /// The `runtimeConfig.portMappings` ADD was given.
    pub port_mappings: Vec<Value>,
    /// The pinned namespace (device, inode) of ADD.
    pub netns_id: Option<(u64, u64)>,
    /// The result of the last plugin; `None` while ADD runs.
    pub result: Option<Value>,
}

/// The (device, inode) that identifies a network namespace file.
pub(super) fn netns_id(path: &Path) -> Result<(u64, u64), NetworkError> {
    let meta = std::fs::metadata(path).map_err(|source| NetworkError::Io {
        what: "network namespace",
        path: path.to_path_buf(),
        source,
    })?;
    Ok((meta.dev(), meta.ino()))
}

/// The state and pin paths of one container.
pub(super) struct Paths {
    pub state: PathBuf,
    pub pin: PathBuf,
}

impl Paths {
    /// The state file of `container_id` in `state_dir`, its pin in
    /// `pin_dir` (named by a hash of the state file's path: one per agent,
    /// namespace and container, whatever the id's length).
    pub fn new(state_dir: &Path, pin_dir: &Path, container_id: &str) -> Self {
        use sha2::{Digest, Sha256};
        let state = state_dir.join(format!("{container_id}.json"));
        let digest = Sha256::digest(state.as_os_str().as_encoded_bytes());
        let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        Paths { state, pin: pin_dir.join(format!("ank-{hash}.netns")) }
    }

    /// The stored state; `None` when there is none (never added, or
    /// deleted already).
    pub async fn load(&self) -> Result<Option<State>, NetworkError> {
        let text = match tokio::fs::read(&self.state).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(NetworkError::Io { what: "reading CNI state", path: self.state.clone(), source });
            }
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| NetworkError::State { path: self.state.clone(), reason: e.to_string() })
    }

    /// Writes the state (a temporary file renamed over the old one: a
    /// crash leaves the old or the new, never half of one).
    pub async fn store(&self, state: &State) -> Result<(), NetworkError> {
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| NetworkError::Io { what, path, source }
        };
        let text = serde_json::to_vec_pretty(state)
            .map_err(|e| NetworkError::State { path: self.state.clone(), reason: e.to_string() })?;
        let tmp = self.state.with_extension("json.tmp");
        tokio::fs::write(&tmp, text).await.map_err(io("writing CNI state", &tmp))?;
        tokio::fs::rename(&tmp, &self.state).await.map_err(io("writing CNI state", &self.state))
    }

    /// Removes the state (absent is fine).
    pub async fn remove(&self) -> Result<(), NetworkError> {
        match tokio::fs::remove_file(&self.state).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(NetworkError::Io { what: "removing CNI state", path: self.state.clone(), source: e })
            }
            _ => Ok(()),
        }
    }

    /// Bind-mounts `netns` on the pin; returns the namespace's id.
    pub fn pin(&self, netns: &Path) -> Result<(u64, u64), NetworkError> {
        let id = netns_id(netns)?;
        self.unpin()?;
        std::fs::File::create(&self.pin).map_err(|source| NetworkError::Io {
            what: "creating the network namespace pin",
            path: self.pin.clone(),
            source,
        })?;
        nix::mount::mount(Some(netns), &self.pin, None::<&str>, MsFlags::MS_BIND, None::<&str>).map_err(|e| {
            NetworkError::Io {
                what: "pinning the network namespace (bind mount) on",
                path: self.pin.clone(),
                source: e.into(),
            }
        })?;
        Ok(id)
    }

    /// The pinned namespace's path when the pin still holds the namespace
    /// `id`.
    pub fn pinned(&self, id: Option<(u64, u64)>) -> Option<&Path> {
        let id = id?;
        (netns_id(&self.pin).ok() == Some(id)).then_some(self.pin.as_path())
    }

    /// Unmounts and removes the pin (absent is fine).
    pub fn unpin(&self) -> Result<(), NetworkError> {
        // Not mounted (EINVAL) or absent (ENOENT): nothing to undo.
        let _ = nix::mount::umount2(&self.pin, MntFlags::MNT_DETACH);
        match std::fs::remove_file(&self.pin) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(NetworkError::Io { what: "removing the network namespace pin", path: self.pin.clone(), source: e })
            }
            _ => Ok(()),
        }
    }
}
