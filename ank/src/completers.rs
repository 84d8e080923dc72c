//! Dynamic shell completion of workload names, config names and field
//! masks, as Ankaios' `ank` completes them: the candidates come from the
//! running server, read by calling this very program as
//! `ank get state -o json [MASK]` (so the environment and config file that
//! reach the server are the user's). No server, no candidates.

use std::ffi::OsStr;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use serde_json::Value;

/// Completes the names of the desired state's workloads.
pub fn workloads() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        matching(names_under(&state("desiredState.workloads"), &["desiredState", "workloads"]), current)
    })
}

/// Completes the names of the desired state's configs.
pub fn configs() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| {
        matching(names_under(&state("desiredState.configs"), &["desiredState", "configs"]), current)
    })
}

/// Completes field masks of the complete state.
pub fn masks() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| matching(mask_candidates(&state("")), current))
}

/// The state as `ank get state -o json MASK` prints it, `Null` when that fails.
fn state(mask: &str) -> Value {
    let Ok(me) = std::env::current_exe() else { return Value::Null };
    let mut command = std::process::Command::new(me);
    command.args(["get", "state", "-o", "json"]).env_remove("COMPLETE");
    if !mask.is_empty() {
        command.arg(mask);
    }
    command
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| serde_json::from_slice(&o.stdout).ok())
        .unwrap_or(Value::Null)
}

/// The keys of the map at `path` in `tree`.
pub fn names_under(tree: &Value, path: &[&str]) -> Vec<String> {
    let map = path.iter().try_fold(tree, |node, key| node.get(key));
    map.and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// The masks Ankaios offers: desiredState and its workloads and configs,
/// workloadStates by agent and workload, agents with their status and tags.
pub fn mask_candidates(tree: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if tree.get("desiredState").is_some() {
        out.push("desiredState".to_owned());
        for part in ["workloads", "configs"] {
            if tree["desiredState"].get(part).is_some() {
                out.push(format!("desiredState.{part}"));
                out.extend(
                    names_under(tree, &["desiredState", part]).iter().map(|n| format!("desiredState.{part}.{n}")),
                );
            }
        }
    }
    if let Some(states) = tree.get("workloadStates").and_then(Value::as_object) {
        out.push("workloadStates".to_owned());
        for (agent, workloads) in states {
            out.push(format!("workloadStates.{agent}"));
            for name in workloads.as_object().into_iter().flat_map(|m| m.keys()) {
                out.push(format!("workloadStates.{agent}.{name}"));
            }
        }
    }
    if let Some(agents) = tree.get("agents").and_then(Value::as_object) {
        out.push("agents".to_owned());
        for (agent, data) in agents {
            out.push(format!("agents.{agent}"));
            for field in ["status", "tags"] {
                if data.get(field).is_some() {
                    out.push(format!("agents.{agent}.{field}"));
                }
            }
        }
    }
    out
}

fn matching(candidates: Vec<String>, current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_str().unwrap_or_default();
    candidates.into_iter().filter(|c| c.starts_with(prefix)).map(CompletionCandidate::new).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn completers_offer_names_and_the_masks_ankaios_offers() {
        let tree = json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"web": {}, "db": {}}, "configs": {"port": "80"}},
            "workloadStates": {"agent_A": {"web": {"1": {}}}},
            "agents": {"agent_A": {"status": {}}},
        });
        assert_eq!(names_under(&tree, &["desiredState", "workloads"]), ["db", "web"]);
        assert_eq!(names_under(&Value::Null, &["desiredState", "configs"]), Vec::<String>::new());
        let masks = mask_candidates(&tree);
        for expected in [
            "desiredState.workloads.web",
            "desiredState.configs.port",
            "workloadStates.agent_A.web",
            "agents.agent_A.status",
        ] {
            assert!(masks.contains(&expected.to_owned()), "{expected}: {masks:?}");
        }
        assert!(!masks.contains(&"agents.agent_A.tags".to_owned()));
        let offered = matching(masks, OsStr::new("desiredState.w"));
        assert_eq!(offered.len(), 3, "desiredState.workloads and its two workloads");
    }
}
