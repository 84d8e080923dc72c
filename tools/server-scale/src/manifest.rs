//! The benchmark's manifests: `agents` agents of [`WORKLOADS_PER_AGENT`]
//! workloads each (`runtime: podman`, a busybox `runtimeConfig` the fake
//! runtime only parses), optionally with one workload's `commandArgs`
//! changed; and the `UpdateState` request `ank apply` sends for them.

use std::path::{Path, PathBuf};

use ank_common::messages::RequestContent;

use crate::error::{Result, ScaleError};
use crate::fleet::agent_name;

/// Workloads on each agent.
pub const WORKLOADS_PER_AGENT: usize = 20;

/// The name of workload `workload` of agent `agent`.
pub fn workload_name(agent: usize, workload: usize) -> String {
    format!("w{agent:03}_{workload:02}")
}

/// One workload's place: (agent index, workload index).
pub type Slot = (usize, usize);

/// The manifest text; the workload at `changed` sleeps a second longer.
pub fn text(agents: usize, changed: Option<Slot>) -> String {
    let mut out = String::from("apiVersion: v1\nworkloads:\n");
    for agent in 0..agents {
        for workload in 0..WORKLOADS_PER_AGENT {
            let seconds = if changed == Some((agent, workload)) { 3601 } else { 3600 };
            out.push_str(&format!(
                "  {}:\n    runtime: podman\n    agent: {}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      \
                 image: docker.io/library/busybox:1.36\n      commandOptions: [\"--rm\"]\n      \
                 commandArgs: [\"sleep\", \"{seconds}\"]\n",
                workload_name(agent, workload),
                agent_name(agent),
            ));
        }
    }
    out
}

/// Writes the manifest to `folder` and turns it into the request
/// `ank apply` sends.
pub fn request(folder: &Path, agents: usize, changed: Option<Slot>) -> Result<RequestContent> {
    let path = folder.join(format!("scale-{agents}.yaml"));
    std::fs::write(&path, text(agents, changed)).map_err(|source| ScaleError::Write { path: path.clone(), source })?;
    let failed = |e: &dyn std::fmt::Display| ScaleError::Manifest { path: path.clone(), reason: e.to_string() };
    let files = [path_string(&path)];
    let manifests = ank_cli::cmd::apply::read_manifests(&files).map_err(|e| failed(&e))?;
    let merged = ank_cli::cmd::apply::merge(manifests).map_err(|e| failed(&e))?;
    merged.update_request(false).map_err(|e| failed(&e))
}

fn path_string(path: &Path) -> String {
    PathBuf::from(path).to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_has_one_mask_per_workload() {
        let dir = tempfile::tempdir().expect("tmp");
        let RequestContent::UpdateState { update_mask, .. } = request(dir.path(), 3, Some((1, 2))).expect("request")
        else {
            panic!("not an update");
        };
        assert_eq!(update_mask.len(), 3 * WORKLOADS_PER_AGENT);
        assert!(text(3, Some((1, 2))).contains("\"3601\""));
    }
}
