//! What the probes of every container runtime share: an `exec` try runs a
//! command the runtime's [`ContainerAccess`] prepares and passes on exit
//! code 0, with its output as the result's text; `httpGet` and `tcpSocket`
//! connect in the container's network namespace ([`super::netns`]) through
//! the container's pid, which the access finds (and finds again once when
//! the namespace is gone: a container started anew has a new pid).

use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;

use super::netns::{self, NetnsError};
use super::{ProbeAction, ProbeOutcome, ProbeTarget};

/// Why a probe cannot reach into its container.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    #[error("the container is not running")]
    NotRunning,
    /// The runtime does not say the pid; the text says what it said.
    #[error("no pid of the container: {0}")]
    NoPid(String),
    /// Connecting in the namespace failed.
    #[error("tcp {0}")]
    Tcp(NetnsError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
}

/// How a runtime reaches into one of its containers.
#[async_trait]
pub trait ContainerAccess: Send + Sync {
    /// The command that runs `command` in the container (not yet spawned).
    async fn exec_command(&self, target: &ProbeTarget, command: &[String]) -> tokio::process::Command;

    /// The pid of the container's main process, as the runtime says now.
    async fn find_pid(&self, target: &ProbeTarget) -> Result<u32, ReachError>;
}

/// One try of `action` on `target` through `access`.
pub async fn probe(
    access: &dyn ContainerAccess,
    target: &ProbeTarget,
    action: &ProbeAction,
    timeout: Duration,
) -> ProbeOutcome {
    match action {
        ProbeAction::Exec(e) => exec(access, target, &e.command).await,
        ProbeAction::TcpSocket(t) => match connect(access, target, t.host.as_deref(), t.port, timeout).await {
            Ok((_, addr)) => ProbeOutcome::pass(format!("tcp {addr}: connected")),
            Err(e) => ProbeOutcome::fail(e.to_string()),
        },
        ProbeAction::HttpGet(h) => {
            let (mut stream, addr) = match connect(access, target, h.host.as_deref(), h.port, timeout).await {
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

async fn exec(access: &dyn ContainerAccess, target: &ProbeTarget, command: &[String]) -> ProbeOutcome {
    let mut cmd = access.exec_command(target, command).await;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
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

/// The container's pid, from the target's cache or the runtime.
async fn pid(access: &dyn ContainerAccess, target: &ProbeTarget) -> Result<u32, ReachError> {
    if let Some(pid) = *target.pid.lock().unwrap_or_else(|p| p.into_inner()) {
        return Ok(pid);
    }
    let pid = access.find_pid(target).await?;
    *target.pid.lock().unwrap_or_else(|p| p.into_inner()) = Some(pid);
    Ok(pid)
}

/// A socket to `host:port` in the container's namespace.
async fn connect(
    access: &dyn ContainerAccess,
    target: &ProbeTarget,
    host: Option<&str>,
    port: u16,
    timeout: Duration,
) -> Result<(tokio::net::TcpStream, std::net::SocketAddr), ReachError> {
    let addr = netns::address(host, port)?;
    let first = pid(access, target).await?;
    match netns::connect(first, addr, timeout).await {
        Ok(s) => Ok((s, addr)),
        Err(e) if e.is_namespace() => {
            // A stale pid: ask the runtime once more.
            *target.pid.lock().unwrap_or_else(|p| p.into_inner()) = None;
            let again = pid(access, target).await?;
            netns::connect(again, addr, timeout).await.map(|s| (s, addr)).map_err(ReachError::Netns)
        }
        Err(e @ NetnsError::Connect { .. }) => Err(ReachError::Tcp(e)),
        Err(e) => Err(e.into()),
    }
}

fn path_of(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

/// A command of an OCI runtime binary, with the environment a container
/// runtime would give it (not the agent's systemd notification socket and
/// watchdog).
pub fn runtime_command(binary: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(binary);
    cmd.stdin(Stdio::null());
    for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
        cmd.env_remove(var);
    }
    cmd
}
