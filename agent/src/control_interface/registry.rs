//! [`ControlInterfaces`]: the running control interfaces of this agent by
//! workload name. Control loops open one when they create (or resume) a
//! workload that has allow rules and close it when the workload is
//! deleted; the AgentManager hands it the server's responses whose request
//! ids carry a `<workload>@` prefix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ank_common::WorkloadInstanceName;
use ank_common::messages::{Response, ToServer};
use ank_common::workload::ControlInterfaceAccess;
use tokio::sync::mpsc;

use super::fifo;
use super::pipes::{ControlInterface, ControlInterfaceHandle};
use super::session::route_response;

#[derive(Debug)]
struct Entry {
    handle: ControlInterfaceHandle,
    access: ControlInterfaceAccess,
}

/// Shared registry of the agent's control interfaces (cheap to clone).
#[derive(Debug, Clone)]
pub struct ControlInterfaces {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    to_server: mpsc::UnboundedSender<ToServer>,
}

impl ControlInterfaces {
    /// Requests of workloads go to `to_server`.
    pub fn new(to_server: mpsc::UnboundedSender<ToServer>) -> Self {
        Self { entries: Arc::default(), to_server }
    }

    /// Opens (or keeps) the control interface of `instance` when `access`
    /// has allow rules; returns the folder to mount. A workload without
    /// allow rules gets none, and an old one is closed.
    // [impl->swdd~agent-create-control-interface-pipes-per-workload~1]
    pub fn open(
        &self,
        io_folder: &Path,
        instance: &WorkloadInstanceName,
        access: &ControlInterfaceAccess,
    ) -> std::io::Result<Option<PathBuf>> {
        let name = instance.workload_name.clone();
        if access.allow_rules.is_empty() {
            self.close(&name);
            return Ok(None);
        }
        let folder = fifo::control_interface_folder(io_folder, instance);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get(&name)
            && e.handle.folder() == folder
            && &e.access == access
        {
            return Ok(Some(folder));
        }
        if let Some(old) = entries.remove(&name) {
            old.handle.stop();
            if old.handle.folder() != folder {
                fifo::remove_pipes(old.handle.folder());
            }
        }
        let handle = ControlInterface::start(&name, folder.clone(), access.clone(), self.to_server.clone())?;
        entries.insert(name, Entry { handle, access: access.clone() });
        Ok(Some(folder))
    }

    /// Stops the control interface of a deleted workload and removes its pipes.
    pub fn close(&self, workload: &str) {
        let removed = self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(workload);
        if let Some(e) = removed {
            e.handle.stop();
            fifo::remove_pipes(e.handle.folder());
        }
    }

    /// Delivers a response to the workload its id names; false if it is
    /// none of ours.
    pub fn deliver(&self, response: &Response) -> bool {
        let Some((workload, message)) = route_response(response) else { return false };
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(&workload) {
            Some(e) => e.handle.deliver(message),
            None => {
                tracing::debug!("response for workload '{workload}', which has no control interface");
                false
            }
        }
    }
}
