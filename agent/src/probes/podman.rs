//! [`PodmanProbes`]: the [`ProbeExecutor`] of the podman runtime.
//!
//! - `exec`: `podman exec <id> <command>`; exit code 0 passes, the output
//!   (stdout and stderr) is the result's text. The process is killed when
//!   the try times out. (`podman healthcheck run` would need a healthcheck
//!   set at create time and costs about the same; see `docs/health.md`.)
//! - `httpGet` / `tcpSocket`: a socket connected in the container's network
//!   namespace ([`super::netns`]), found through the container's pid
//!   (`podman inspect`, asked once per runner and cached in its
//!   [`ProbeTarget`], asked again when the namespace is gone).

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;

use super::netns::{self, NetnsError};
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

    async fn exec(&self, target: &ProbeTarget, command: &[String]) -> ProbeOutcome {
        let mut args = vec!["exec".to_owned(), target.workload_id.0.clone()];
        args.extend(command.iter().cloned());
        let mut cmd = self.cli.command(&args);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let shown = format!("exec [{}]", command.join(" "));
        let out = match cmd.output().await {
            Ok(out) => out,
            Err(e) => return ProbeOutcome::fail(format!("{shown}: cannot run podman: {e}")),
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

fn path_of(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}
