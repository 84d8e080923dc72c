//! The file of the open update gates that goes with the state file
//! (`state.json` -> `state.gates.json`): written (atomically, as the state
//! file) only when a gate opens or closes, never at a tick, so that flash
//! storage is not worn by the clock. A missing file means no open gate.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::SavedGate;
use crate::state_file::{StateFile, write_atomically};

/// The content of the file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Content {
    #[serde(default)]
    gates: Vec<SavedGate>,
}

/// Where the open gates are kept across restarts.
#[derive(Debug, Clone)]
pub struct GateFile {
    path: PathBuf,
}

impl GateFile {
    /// The gate file next to `state`.
    pub fn next_to(state: &StateFile) -> Self {
        Self { path: state.path().with_extension("gates.json") }
    }

    /// The saved gates; none when the file is missing. A file that does not
    /// read is logged and ignored: the gates then only restart when their
    /// workloads change again (nothing is reverted without a known target).
    pub fn load(&self) -> Vec<SavedGate> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                tracing::warn!("cannot read update gates '{}': {e}; no gate restored", self.path.display());
                return Vec::new();
            }
        };
        match serde_json::from_str::<Content>(&text) {
            Ok(c) => c.gates,
            Err(e) => {
                tracing::warn!("update gates '{}' do not read: {e}; no gate restored", self.path.display());
                Vec::new()
            }
        }
    }

    /// Replaces the saved gates; an empty list removes the file.
    pub fn save(&self, gates: Vec<SavedGate>) -> std::io::Result<()> {
        if gates.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let mut text = serde_json::to_vec_pretty(&Content { gates }).map_err(std::io::Error::other)?;
        text.push(b'\n');
        write_atomically(&self.path, &text)
    }
}
