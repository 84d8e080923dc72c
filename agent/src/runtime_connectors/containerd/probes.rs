//! [`ContainerdProbes`]: the [`ProbeExecutor`] of the containerd runtime.
//!
//! - `exec`: `runc --root /run/containerd/runc/<namespace> exec <id>
//!   <command>`: containerd's runc v2 shim keeps its containers' runc state
//!   there, and runc runs the command with the container's own process spec
//!   (namespaces, cgroup, user, capabilities), as `ctr tasks exec` would,
//!   without a FIFO set for the shim.
//! - `httpGet` / `tcpSocket`: in the task's network namespace, through the
//!   task's pid from `Tasks.Get` ([`container`](crate::runtime_connectors::probe_exec::container)).

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use crate::runtime_connectors::containerd::client::Containerd;
use crate::runtime_connectors::probe_exec::container::{self, ContainerAccess, ReachError, runtime_command};
use crate::runtime_connectors::probe_exec::{ProbeAction, ProbeExecutor, ProbeOutcome, ProbeTarget};

/// Where containerd's runc shims keep runc's state, per namespace.
pub const RUNC_STATE: &str = "/run/containerd/runc";

/// Probes of containerd workloads.
#[derive(Debug, Clone)]
pub struct ContainerdProbes {
    cd: Containerd,
    runc: PathBuf,
    root: PathBuf,
}

impl ContainerdProbes {
    /// Probes of the workloads of `cd`'s namespace, with `runc` from PATH.
    pub fn new(cd: Containerd) -> Self {
        let root = PathBuf::from(RUNC_STATE).join(cd.namespace());
        Self { cd, runc: PathBuf::from("runc"), root }
    }

    /// The runc exec arguments of `command` in container `id`.
    pub fn exec_args(&self, id: &str, command: &[String]) -> Vec<String> {
        let mut args = vec!["--root".to_owned(), self.root.display().to_string(), "exec".to_owned(), id.to_owned()];
        args.extend(command.iter().cloned());
        args
    }
}

#[async_trait]
impl ContainerAccess for ContainerdProbes {
    async fn exec_command(&self, target: &ProbeTarget, command: &[String]) -> tokio::process::Command {
        let mut cmd = runtime_command(&self.runc);
        cmd.args(self.exec_args(&target.workload_id.0, command));
        cmd
    }

    async fn find_pid(&self, target: &ProbeTarget) -> Result<u32, ReachError> {
        use containerd_client::types::v1::Status;
        match self.cd.task(&target.workload_id.0).await {
            Ok(Some(t)) if matches!(Status::try_from(t.status), Ok(Status::Running)) && t.pid > 0 => Ok(t.pid),
            Ok(_) => Err(ReachError::NotRunning),
            Err(e) => Err(ReachError::NoPid(e.to_string())),
        }
    }
}

#[async_trait]
impl ProbeExecutor for ContainerdProbes {
    async fn probe(&self, target: &ProbeTarget, action: &ProbeAction, timeout: Duration) -> ProbeOutcome {
        container::probe(self, target, action, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_runs_runc_in_the_namespaces_state_root() {
        let p = ContainerdProbes::new(Containerd::new(std::path::Path::new("/nonexistent.sock"), "edge"));
        assert_eq!(
            p.exec_args("web.1234567.a", &["sh".into(), "-c".into(), "true".into()]),
            ["--root", "/run/containerd/runc/edge", "exec", "web.1234567.a", "sh", "-c", "true"]
        );
    }
}
