//! [`PodmanProbes`]: the [`ProbeExecutor`] of the podman runtime.
//!
//! - `exec`: through the container's OCI runtime (`runc exec <id>
//!   <command>`, [`super::oci_exec`]), a quarter of the CPU of `podman
//!   exec`, which stays the way when the runtime cannot be found; exit code
//!   0 passes, the output (stdout and stderr) is the result's text. The
//!   process is killed when the try times out. (`podman healthcheck run`
//!   would need a healthcheck set at create time and costs as much as
//!   `podman exec`; see `docs/health.md`.)
//! - `httpGet` / `tcpSocket`: a socket connected in the container's network
//!   namespace ([`super::netns`]), found through the container's pid
//!   (`podman inspect`, asked once per runner and cached in its
//!   [`ProbeTarget`], asked again when the namespace is gone).

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;

use super::netns::{self, NetnsError};
use super::oci_exec::{OciRuntime, state_says_running};
use super::{ProbeAction, ProbeExecutor, ProbeOutcome, ProbeTarget};
use crate::runtime_connectors::podman::PodmanCli;

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
        let out = runtime_command(&runtime).args(runtime.args("state", &[id.to_owned()])).output().await.ok()?;
        (out.status.success() && state_says_running(&String::from_utf8_lossy(&out.stdout))).then_some(runtime)
    }

    async fn exec(&self, target: &ProbeTarget, command: &[String]) -> ProbeOutcome {
        let mut rest = vec![target.workload_id.0.clone()];
        rest.extend(command.iter().cloned());
        let (mut cmd, tool) = match self.oci(target).await {
            Some(rt) => (runtime_command(&rt), rt.args("exec", &rest)),
            None => (self.cli.command(&[]), [vec!["exec".to_owned()], rest].concat()),
        };
        cmd.args(&tool).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let shown = format!("exec [{}]", command.join(" "));
        let out = match cmd.output().await {
            Ok(out) => out,
            Err(e) => return ProbeOutcome::fail(format!("{shown}: cannot run the container's exec: {e}")),
        };
        let mut text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.trim().is_empty() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(stderr.trim());
        }
        match out.status.code() {
            Some(0) => ProbeOutcome::pass(format!("{shown} exit 0: {text}")),
            Some(code) => ProbeOutcome::fail(format!("{shown} exit {code}: {text}")),
            None => ProbeOutcome::fail(format!("{shown} killed: {text}")),
        }
    }

    /// The container's pid, from the cache or podman.
    async fn pid(&self, target: &ProbeTarget) -> Result<u32, String> {
        if let Some(pid) = *target.pid.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(pid);
        }
        let args: Vec<String> =
            ["inspect", "--type", "container", "--format", "{{.State.Pid}}", target.workload_id.0.as_str()]
                .map(str::to_owned)
                .to_vec();
        let out = self.cli.exec(&args).await.map_err(|e| format!("no pid of the container: {}", e.message()))?;
        let pid: u32 = out.trim().parse().map_err(|_| format!("no pid of the container: '{}'", out.trim()))?;
        if pid == 0 {
            return Err("the container is not running".to_owned());
        }
        *target.pid.lock().unwrap_or_else(|p| p.into_inner()) = Some(pid);
        Ok(pid)
    }

    /// A socket to `host:port` in the container's namespace.
    async fn connect(
        &self,
        target: &ProbeTarget,
        host: Option<&str>,
        port: u16,
        timeout: Duration,
    ) -> Result<(tokio::net::TcpStream, std::net::SocketAddr), String> {
        let addr = netns::address(host, port).map_err(|e| e.to_string())?;
        let pid = self.pid(target).await?;
        match netns::connect(pid, addr, timeout).await {
            Ok(s) => Ok((s, addr)),
            Err(e) if e.is_namespace() => {
                // A stale pid: ask podman once more.
                *target.pid.lock().unwrap_or_else(|p| p.into_inner()) = None;
                let pid = self.pid(target).await?;
                netns::connect(pid, addr, timeout).await.map(|s| (s, addr)).map_err(|e| e.to_string())
            }
            Err(e @ NetnsError::Connect { .. }) => Err(format!("tcp {e}")),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[async_trait]
impl ProbeExecutor for PodmanProbes {
    async fn probe(&self, target: &ProbeTarget, action: &ProbeAction, timeout: Duration) -> ProbeOutcome {
        match action {
            ProbeAction::Exec(e) => self.exec(target, &e.command).await,
            ProbeAction::TcpSocket(t) => match self.connect(target, t.host.as_deref(), t.port, timeout).await {
                Ok((_, addr)) => ProbeOutcome::pass(format!("tcp {addr}: connected")),
                Err(e) => ProbeOutcome::fail(e),
            },
            ProbeAction::HttpGet(h) => {
                let (mut stream, addr) = match self.connect(target, h.host.as_deref(), h.port, timeout).await {
                    Ok(s) => s,
                    Err(e) => return ProbeOutcome::fail(format!("HTTP GET {}: {e}", h.path)),
                };
                match netns::http_get(&mut stream, addr, &h.path).await {
                    Ok((code, line)) if (200..400).contains(&code) => ProbeOutcome::pass(line),
                    Ok((_, line)) => ProbeOutcome::fail(format!("HTTP GET {addr}{}: {line}", path_of(&h.path))),
                    Err(e) => ProbeOutcome::fail(format!("HTTP GET {addr}{}: {e}", path_of(&h.path))),
                }
            }
        }
    }
}

/// A command of the OCI runtime, with the environment podman's get (not
/// the agent's systemd notification socket and watchdog).
fn runtime_command(runtime: &OciRuntime) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&runtime.binary);
    cmd.stdin(Stdio::null());
    for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
        cmd.env_remove(var);
    }
    cmd
}

fn path_of(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}
