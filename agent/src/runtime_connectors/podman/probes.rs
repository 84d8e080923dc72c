//! [`PodmanProbes`]: the [`ProbeExecutor`] of the podman runtime.
//!
//! - `exec`: through the container's OCI runtime (`runc exec <id>
//!   <command>`, [`oci_exec`](crate::runtime_connectors::probe_exec::oci_exec)), a quarter of the CPU of `podman
//!   exec`, which stays the way when the runtime cannot be found; exit code
//!   0 passes, the output (stdout and stderr) is the result's text. The
//!   process is killed when the try times out. (`podman healthcheck run`
//!   would need a healthcheck set at create time and costs as much as
//!   `podman exec`; see `docs/health.md`.)
//! - `httpGet` / `tcpSocket`: a socket connected in the container's network
//!   namespace ([`container`](crate::runtime_connectors::probe_exec::container)), found through the container's pid
//!   (`podman inspect`, asked once per runner and cached in its
//!   [`ProbeTarget`], asked again when the namespace is gone).

use std::time::Duration;

use async_trait::async_trait;

use crate::runtime_connectors::podman::PodmanCli;
use crate::runtime_connectors::probe_exec::container::{self, ContainerAccess, ReachError, runtime_command};
use crate::runtime_connectors::probe_exec::oci_exec::{OciRuntime, state_says_running};
use crate::runtime_connectors::probe_exec::{ProbeAction, ProbeExecutor, ProbeOutcome, ProbeTarget};

/// Probes through the podman command line tool.
#[derive(Debug, Clone)]
pub struct PodmanProbes {
    cli: PodmanCli,
}

impl PodmanProbes {
    pub fn new(cli: PodmanCli) -> Self {
        Self { cli }
    }

    /// The container's OCI runtime, looked up once per runner: `None` when
    /// conmon or the runtime does not answer as expected.
    async fn oci(&self, target: &ProbeTarget) -> Option<OciRuntime> {
        if let Some(known) = target.oci.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return known;
        }
        let found = self.find_oci(&target.workload_id.0).await;
        match &found {
            Some(rt) => tracing::debug!("exec probes of '{}' run through {}", target.workload_id, rt.binary.display()),
            None => tracing::debug!("exec probes of '{}' run through podman exec", target.workload_id),
        }
        *target.oci.lock().unwrap_or_else(|p| p.into_inner()) = Some(found.clone());
        found
    }

    async fn find_oci(&self, id: &str) -> Option<OciRuntime> {
        let args: Vec<String> =
            ["inspect", "--type", "container", "--format", "{{.ConmonPidFile}}", id].map(str::to_owned).to_vec();
        let pid_file = self.cli.exec(&args).await.ok()?;
        let pid: u32 = tokio::fs::read_to_string(pid_file.trim()).await.ok()?.trim().parse().ok()?;
        let runtime = OciRuntime::of_conmon(pid)?;
        let out = runtime_command(&runtime.binary).args(runtime.args("state", &[id.to_owned()])).output().await.ok()?;
        (out.status.success() && state_says_running(&String::from_utf8_lossy(&out.stdout))).then_some(runtime)
    }
}

#[async_trait]
impl ContainerAccess for PodmanProbes {
    async fn exec_command(&self, target: &ProbeTarget, command: &[String]) -> tokio::process::Command {
        let mut rest = vec![target.workload_id.0.clone()];
        rest.extend(command.iter().cloned());
        let (mut cmd, tool) = match self.oci(target).await {
            Some(rt) => (runtime_command(&rt.binary), rt.args("exec", &rest)),
            None => (self.cli.command(&[]), [vec!["exec".to_owned()], rest].concat()),
        };
        cmd.args(&tool);
        cmd
    }

    async fn find_pid(&self, target: &ProbeTarget) -> Result<u32, ReachError> {
        let args: Vec<String> =
            ["inspect", "--type", "container", "--format", "{{.State.Pid}}", target.workload_id.0.as_str()]
                .map(str::to_owned)
                .to_vec();
        let out = self.cli.exec(&args).await.map_err(|e| ReachError::NoPid(e.message().to_string()))?;
        let pid: u32 = out.trim().parse().map_err(|_| ReachError::NoPid(format!("'{}'", out.trim())))?;
        if pid == 0 {
            return Err(ReachError::NotRunning);
        }
        Ok(pid)
    }
}

#[async_trait]
impl ProbeExecutor for PodmanProbes {
    async fn probe(&self, target: &ProbeTarget, action: &ProbeAction, timeout: Duration) -> ProbeOutcome {
        container::probe(self, target, action, timeout).await
    }
}
