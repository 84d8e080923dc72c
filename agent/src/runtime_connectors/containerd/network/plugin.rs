//! One call of one CNI plugin (CNI spec 1.0 "protocol parameters"): the
//! binary is run with `CNI_*` in its environment and its network
//! configuration as JSON on stdin; it answers a result (ADD) or nothing
//! (DEL) on stdout, or exits non-zero with an error object
//! `{code, msg, details}`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::NetworkError;

/// The `PATH` plugins get: they run `iptables`, `ip6tables` and friends,
/// which live in the sbin folders an agent started with a user's `PATH`
/// may lack. The rest of the agent's environment is not passed on.
const PLUGIN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The parameters of one call, the same for every plugin of a list.
#[derive(Debug, Clone)]
pub(super) struct CallParams<'a> {
    /// `ADD` or `DEL`.
    pub command: &'static str,
    pub container_id: &'a str,
    /// The network namespace's path; empty for a DEL of a namespace that
    /// is gone.
    pub netns: &'a str,
    pub ifname: &'a str,
    /// The plugin folders, `:`-separated (delegated plugins such as the
    /// IPAM one are looked up there).
    pub cni_path: &'a str,
    pub timeout: Duration,
}

/// Runs the plugin `binary` (of type `plugin`) with `config` on stdin.
/// Returns its result: `None` when it printed nothing (DEL).
pub(super) async fn call(
    binary: &Path,
    plugin: &str,
    params: &CallParams<'_>,
    config: &Value,
) -> Result<Option<Value>, NetworkError> {
    let command = params.command;
    let input = config.to_string().into_bytes();
    let mut child = Command::new(binary)
        .env_clear()
        .env("PATH", PLUGIN_PATH)
        .env("CNI_COMMAND", command)
        .env("CNI_CONTAINERID", params.container_id)
        .env("CNI_NETNS", params.netns)
        .env("CNI_IFNAME", params.ifname)
        .env("CNI_PATH", params.cni_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| NetworkError::Spawn { plugin: plugin.to_string(), command, source })?;
    let stdin = child.stdin.take();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A plugin that fails early may close stdin unread: its exit
            // status and output tell why, not this write.
            let _ = stdin.write_all(&input).await;
        }
    };
    let run = async { tokio::join!(feed, child.wait_with_output()).1 };
    let output = tokio::time::timeout(params.timeout, run)
        .await
        .map_err(|_| NetworkError::Timeout { plugin: plugin.to_string(), command, after: params.timeout })?
        .map_err(|source| NetworkError::Spawn { plugin: plugin.to_string(), command, source })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stdout = stdout.trim();
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(plugin_error(plugin, command, stdout, stderr.trim(), output.status));
    }
    if stdout.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(stdout).map(Some).map_err(|e| NetworkError::BadResult {
        plugin: plugin.to_string(),
        command,
        reason: format!("not JSON ({e}): {stdout}"),
    })
}

/// The error of a plugin that exited non-zero: its error object when it
/// printed one, else its stderr.
fn plugin_error(
    plugin: &str,
    command: &'static str,
    stdout: &str,
    stderr: &str,
    status: std::process::ExitStatus,
) -> NetworkError {
    let parsed =
        serde_json::from_str::<Value>(stdout).ok().filter(|v| v.get("msg").is_some() || v.get("code").is_some());
    let (code, msg, details) = match parsed {
        Some(v) => (
            v.get("code").and_then(Value::as_u64),
            v.get("msg").and_then(Value::as_str).unwrap_or_default().to_string(),
            v.get("details").and_then(Value::as_str).unwrap_or_default().to_string(),
        ),
        None => {
            let text = [stderr, stdout]
                .into_iter()
                .find(|t| !t.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("exited with {status}"));
            (None, text, String::new())
        }
    };
    NetworkError::Plugin { plugin: plugin.to_string(), command, code, msg, details }
}
