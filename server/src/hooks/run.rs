//! Running hooks: one child process per hook, the input written to its
//! stdin while its stdout and stderr are read (a large answer cannot block
//! the write), within the hook's timeout; the chain feeds each hook the
//! previous one's answer. A hook's answer is read up to the message limit
//! ([`MAX_HOOK_ANSWER_BYTES`]) and its stderr up to [`MAX_HOOK_STDERR_BYTES`]
//! (the rest is read and dropped): a hook cannot fill the server's memory.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use ank_proto::ank_base::Workload;
use ank_proto::grpc_api::UpdateWorkload;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{HookConfig, HookError};

/// Most bytes of a hook's answer: the gRPC message limit, which no state
/// the server sends can exceed anyway.
pub const MAX_HOOK_ANSWER_BYTES: usize = ank_proto::MAX_MESSAGE_BYTES;
/// Most bytes of a hook's stderr kept for the log and the error text.
pub const MAX_HOOK_STDERR_BYTES: usize = 64 * 1024;

/// What a chain answered, and which hooks changed something.
#[derive(Debug, Clone, PartialEq)]
pub struct HookOutcome {
    /// The last answer (the input if no hook changed it).
    pub output: UpdateWorkload,
    /// Every hook that changed its input, with the workloads it changed.
    pub changed_by: Vec<(String, Vec<String>)>,
}

pub(super) async fn chain(hooks: &[HookConfig], input: UpdateWorkload) -> Result<HookOutcome, HookError> {
    let mut current = input;
    let mut changed_by = Vec::new();
    for hook in hooks {
        tracing::debug!("running mutating hook '{}' (prio {})", hook.name, hook.prio);
        let bytes = current.encode_to_vec();
        let (stdout, stderr) = run_one(hook, &bytes).await?;
        // Ankaios: swdd~server-mutating-hook-skip-unchanged-response~1
        if stdout == bytes {
            continue;
        }
        let mut answer = UpdateWorkload::decode(stdout.as_slice()).map_err(|e| HookError::Invalid {
            hook: hook.name.clone(),
            reason: e.to_string(),
            stderr: stderr.clone(),
        })?;
        keep_extensions(&current, &mut answer);
        let names = changed_workloads(&current, &answer);
        if !names.is_empty() {
            tracing::info!("mutating hook '{}' changed the workloads {}", hook.name, names.join(", "));
            changed_by.push((hook.name.clone(), names));
        }
        current = answer;
    }
    Ok(HookOutcome { output: current, changed_by })
}

/// Runs one hook on `input`: its stdout, and its stderr (trimmed), or why
/// it refused.
async fn run_one(hook: &HookConfig, input: &[u8]) -> Result<(Vec<u8>, String), HookError> {
    let exe = hook.executable();
    let failed = |reason: String| HookError::Failed { hook: hook.name.clone(), reason };
    let mut child = tokio::process::Command::new(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("Failed to execute hook '{}': {e}", exe.display())))?;
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A hook may answer without reading all of it (a veto): a
            // broken pipe is no error, the exit status decides.
            if let Err(e) = stdin.write_all(input).await {
                tracing::debug!("mutating hook input not fully written: {e}");
            }
        }
    };
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(failed(format!("Failed to execute hook '{}': no pipes", exe.display())));
    };
    // stderr is read on its own, so that an answer over the limit is
    // refused at once, whatever the hook does with its stderr.
    let stderr = tokio::spawn(read_capped(stderr, MAX_HOOK_STDERR_BYTES, Beyond::Drop));
    let run = async { tokio::join!(write, read_capped(stdout, MAX_HOOK_ANSWER_BYTES, Beyond::Refuse)).1 };
    // One deadline for reading and for the exit.
    let deadline = tokio::time::Instant::now() + hook.timeout;
    let stdout = match tokio::time::timeout_at(deadline, run).await {
        Ok(Ok(Some(out))) => out,
        Ok(Ok(None)) => {
            stderr.abort();
            let _ = child.kill().await;
            return Err(failed(format!("its answer is larger than {MAX_HOOK_ANSWER_BYTES} bytes; killed")));
        }
        Ok(Err(e)) => return Err(failed(format!("Failed to read from hook '{}': {e}", exe.display()))),
        // Dropping the child kills it.
        Err(_) => {
            stderr.abort();
            return Err(failed(format!("no answer within {} ms; killed", hook.timeout.as_millis())));
        }
    };
    let status = match tokio::time::timeout_at(deadline, child.wait()).await {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => return Err(failed(format!("Failed to wait for hook '{}': {e}", exe.display()))),
        Err(_) => {
            stderr.abort();
            return Err(failed(format!("no answer within {} ms; killed", hook.timeout.as_millis())));
        }
    };
    // The hook has exited; a child it left behind holding stderr open
    // gets the rest of the deadline.
    let stderr = match tokio::time::timeout_at(deadline, stderr).await {
        Ok(Ok(Ok(Some(err)))) => err,
        _ => Vec::new(),
    };
    let stderr = String::from_utf8_lossy(&stderr).trim().to_owned();
    // Ankaios: swdd~server-traces-mutating-hook-stderr~1
    tracing::debug!("mutating hook '{}' ended ({status}); stderr: '{stderr}'", hook.name);
    if status.success() {
        return Ok((stdout, stderr));
    }
    match status.signal() {
        Some(signal) => Err(failed(format!("Hook '{}' was killed by signal {signal}: {stderr}", hook.name))),
        None => Err(HookError::Veto { hook: hook.name.clone(), stderr }),
    }
}

/// What to do with a pipe's bytes beyond the limit.
#[derive(Clone, Copy, PartialEq)]
enum Beyond {
    /// Stop reading: the answer is refused (`None`).
    Refuse,
    /// Read on and drop them, so the hook never blocks on a full pipe.
    Drop,
}

/// Everything `pipe` gives until its end, at most `limit` bytes of it.
async fn read_capped(
    mut pipe: impl AsyncRead + Unpin,
    limit: usize,
    beyond: Beyond,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = pipe.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Some(kept));
        }
        let room = limit.saturating_sub(kept.len());
        if n > room && beyond == Beyond::Refuse {
            return Ok(None);
        }
        kept.extend_from_slice(&chunk[..n.min(room)]);
    }
}

/// A hook built from Ankaios' protobuf files does not know our extension
/// fields of a workload (numbered from 100) and drops them when it
/// re-encodes; they are taken from its input where its answer lacks them.
fn keep_extensions(input: &UpdateWorkload, answer: &mut UpdateWorkload) {
    for added in &mut answer.added_workloads {
        let name = added.instance_name.as_ref().map(|n| n.workload_name.as_str());
        let Some(before) = input
            .added_workloads
            .iter()
            .find(|a| a.instance_name.as_ref().map(|n| n.workload_name.as_str()) == name)
            .and_then(|a| a.workload.as_ref())
        else {
            continue;
        };
        if let Some(after) = added.workload.as_mut() {
            fill_extensions(before, after);
        }
    }
}

fn fill_extensions(before: &Workload, after: &mut Workload) {
    fn keep<T: Clone>(after: &mut Option<T>, before: &Option<T>) {
        if after.is_none() {
            after.clone_from(before);
        }
    }
    keep(&mut after.priority, &before.priority);
    keep(&mut after.effective_priority, &before.effective_priority);
    keep(&mut after.policy, &before.policy);
    keep(&mut after.agent_selector, &before.agent_selector);
    keep(&mut after.migration, &before.migration);
    keep(&mut after.ttl_after_finished, &before.ttl_after_finished);
    keep(&mut after.startup_probe, &before.startup_probe);
    keep(&mut after.liveness_probe, &before.liveness_probe);
    keep(&mut after.readiness_probe, &before.readiness_probe);
    keep(&mut after.restart_backoff, &before.restart_backoff);
    keep(&mut after.update, &before.update);
}

/// The names of the workloads whose entry differs between two messages
/// (changed, dropped or new, added or deleted).
fn changed_workloads(before: &UpdateWorkload, after: &UpdateWorkload) -> Vec<String> {
    use std::collections::BTreeMap;
    fn added(u: &UpdateWorkload) -> BTreeMap<&str, &Option<Workload>> {
        u.added_workloads
            .iter()
            .map(|a| (a.instance_name.as_ref().map_or("", |n| n.workload_name.as_str()), &a.workload))
            .collect()
    }
    fn deleted(u: &UpdateWorkload) -> std::collections::BTreeSet<&str> {
        u.deleted_workloads.iter().map(|d| d.instance_name.as_ref().map_or("", |n| n.workload_name.as_str())).collect()
    }
    let (a0, a1) = (added(before), added(after));
    let mut names: std::collections::BTreeSet<&str> =
        a0.keys().chain(a1.keys()).copied().filter(|n| a0.get(n) != a1.get(n)).collect();
    names.extend(deleted(before).symmetric_difference(&deleted(after)).copied());
    names.into_iter().map(str::to_owned).collect()
}
