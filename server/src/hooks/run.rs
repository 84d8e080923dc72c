//! Running hooks: one child process per hook, the input written to its
//! stdin while its stdout and stderr are read (a large answer cannot block
//! the write), within the hook's timeout; the chain feeds each hook the
//! previous one's answer.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use ank_proto::ank_base::Workload;
use ank_proto::grpc_api::UpdateWorkload;
use prost::Message;
use tokio::io::AsyncWriteExt;

use super::{HookConfig, HookError};

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
    let run = async { tokio::join!(write, child.wait_with_output()).1 };
    let output = match tokio::time::timeout(hook.timeout, run).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(failed(format!("Failed to wait for hook '{}': {e}", exe.display()))),
        // Dropping the child kills it.
        Err(_) => return Err(failed(format!("no answer within {} ms; killed", hook.timeout.as_millis()))),
    };
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    // Ankaios: swdd~server-traces-mutating-hook-stderr~1
    tracing::debug!("mutating hook '{}' ended ({}); stderr: '{stderr}'", hook.name, output.status);
    if output.status.success() {
        return Ok((output.stdout, stderr));
    }
    match output.status.signal() {
        Some(signal) => Err(failed(format!("Hook '{}' was killed by signal {signal}: {stderr}", hook.name))),
        None => Err(HookError::Veto { hook: hook.name.clone(), stderr }),
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
