//! `ank describe workload NAME`: one workload for a human reader: its spec
//! and scheduling fields, where it runs, its instances' states and
//! conditions, and its events.

use std::fmt::Write as _;

use ank_common::Workload;
use ank_common::workload_events::EventKind;
use anyhow::{Context, bail};

use crate::cmd::workload_events::{event_table, events_by_workload};
use crate::cmd::{Ctx, fetch_state};
use crate::output;
use crate::view::StateView;

/// Prints the description of workload `name`.
// [feature K8: `ank describe workload`]
pub async fn workload(ctx: &mut Ctx<'_>, name: &str) -> anyhow::Result<()> {
    let masks = vec![format!("desiredState.workloads.{name}"), "workloadStates".to_owned()];
    let view = fetch_state(ctx, masks).await?;
    let spec = view.workload(name);
    let has_states = view.workload_state_list().iter().any(|s| s.instance_name.workload_name == name);
    if spec.is_none() && !has_states {
        bail!("workload '{name}' not found");
    }
    let spec: Option<Workload> = spec
        .map(|s| {
            s.to_workload().with_context(|| format!("the server sent a workload '{name}' this version cannot read"))
        })
        .transpose()?;
    ctx.print(&describe(name, spec.as_ref(), &view))
}

/// The text of `ank describe workload`.
pub fn describe(name: &str, spec: Option<&Workload>, view: &StateView) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(out, "{:<18}{v}", format!("{k}:"));
    };
    line("Name", name.to_owned());
    match spec {
        None => line("Desired", "no longer in the desired state".to_owned()),
        Some(w) => {
            line("Runtime", w.runtime.clone());
            match &w.agent_selector {
                Some(sel) => line("Agent selector", selector_text(sel)),
                None if w.agent.is_empty() => line("Agent", "(none: not scheduled)".to_owned()),
                None => line("Agent", w.agent.clone()),
            }
            let own = w.priority.unwrap_or(0);
            let priority = match w.effective_priority {
                Some(e) if e != own => format!("{own} (effective {e})"),
                _ => own.to_string(),
            };
            line("Priority", priority);
            let p = &w.policy;
            let flags: Vec<&str> =
                [(p.preempt_enabled, "preemptEnabled"), (p.preempt_exempt, "preemptExempt"), (p.isolated, "isolated")]
                    .into_iter()
                    .filter_map(|(on, n)| on.then_some(n))
                    .collect();
            line("Policy", if flags.is_empty() { "-".to_owned() } else { flags.join(", ") });
            line("Migration", w.migration.as_str().to_owned());
            line("Restart policy", format!("{:?}", w.restart_policy));
            // [feature H6: the probes, only for a workload that has some]
            if let Some(probes) = probes_text(w) {
                line("Probes", probes);
            }
            if let Some(ttl) = &w.ttl_after_finished {
                line("TTL after finish", ttl.clone());
            }
            let deps: Vec<String> = w.dependencies.iter().map(|(d, c)| format!("{d} {c:?}")).collect();
            line("Dependencies", if deps.is_empty() { "-".to_owned() } else { deps.join(", ") });
            let tags: Vec<String> = w.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            line("Tags", if tags.is_empty() { "-".to_owned() } else { tags.join(", ") });
            if let Some(gate) = &w.update {
                line("Update gate", gate_text(gate));
            }
        }
    }
    let events = events_by_workload(view).remove(name).unwrap_or_default();
    let instances: Vec<_> =
        view.workload_state_list().into_iter().filter(|s| s.instance_name.workload_name == name).collect();
    // The server's mark of a failed gated update, else the newest gate
    // decision among the events (UpdateHealthy).
    // [feature: issue 39 `ank describe` shows Reverted]
    if let Some(mark) = instances.iter().find_map(|s| s.status.reverted.as_ref()) {
        line("Reverted", format!("{} (at {})", mark.reason, mark.at));
    } else if let Some(e) =
        events.iter().rev().find(|e| matches!(e.kind, EventKind::Reverted | EventKind::UpdateHealthy))
    {
        let label = if e.kind == EventKind::Reverted { "Reverted" } else { "Update healthy" };
        line(label, format!("{} (at {})", e.reason, e.last));
    }
    let _ = writeln!(out, "\nInstances:");
    if instances.is_empty() {
        let _ = writeln!(out, "  (none reported)");
    }
    for s in &instances {
        let agent = if s.instance_name.agent_name.is_empty() { "-" } else { &s.instance_name.agent_name };
        let _ = writeln!(
            out,
            "  {agent}  id {}  {}  generation {} (observed {})",
            s.instance_name.id,
            state_text(&s.execution_state),
            s.status.generation,
            s.status.observed_generation
        );
        let rows: Vec<[String; 5]> = s
            .status
            .conditions
            .iter()
            .map(|c| {
                [
                    c.kind.as_str().to_owned(),
                    c.status.as_str().to_owned(),
                    c.reason.clone(),
                    cell(&c.message),
                    c.last_transition_time.clone(),
                ]
            })
            .collect();
        if !rows.is_empty() {
            let table = crate::table::table(["CONDITION", "STATUS", "REASON", "MESSAGE", "SINCE"], &rows);
            for l in table.lines() {
                let _ = writeln!(out, "    {l}");
            }
        }
    }
    let _ = writeln!(out, "\nEvents:");
    if events.is_empty() {
        let _ = writeln!(out, "  (none)");
    } else {
        let rows: Vec<_> = events.into_iter().map(|e| (name.to_owned(), e)).collect();
        for l in event_table(&rows).lines() {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

/// Longest message shown in a table cell of `describe`; `ank get state
/// -o yaml` shows it whole.
const MESSAGE_CELL: usize = 120;

/// A message (podman's whole error output, say) as one table cell: on one
/// line (its last `Error:` line, or its lines joined), cut to
/// [`MESSAGE_CELL`] characters.
fn cell(message: &str) -> String {
    let line = output::one_line(message);
    if line.chars().count() <= MESSAGE_CELL {
        return line;
    }
    let cut: String = line.chars().take(MESSAGE_CELL - 1).collect();
    format!("{cut}…")
}

/// An execution state on one line, its additional info as a [`cell`].
fn state_text(state: &ank_common::ExecutionState) -> String {
    if state.additional_info.is_empty() {
        state.kind.to_string()
    } else {
        format!("{}: '{}'", state.kind, cell(&state.additional_info))
    }
}

/// An `update` block as one line: its settings as written, the defaults
/// filled in.
fn gate_text(gate: &ank_common::health_spec::UpdateGate) -> String {
    use ank_common::duration::format_duration;
    match gate.settings() {
        Ok(s) => format!(
            "healthyDeadline {}, minHealthyTime {}, autoRevert {}",
            gate.healthy_deadline.clone().unwrap_or_else(|| format_duration(s.healthy_deadline)),
            gate.min_healthy_time.clone().unwrap_or_else(|| format_duration(s.min_healthy_time)),
            if s.auto_revert { "on" } else { "off" }
        ),
        Err(e) => format!("invalid: {e}"),
    }
}

/// `readiness httpGet 127.0.0.1:8080/ready every 5s; liveness exec [cat /tmp/alive] every 10s`;
/// `None` without probes. Their verdicts are in the Available condition.
fn probes_text(w: &Workload) -> Option<String> {
    let all = [("startup", &w.startup_probe), ("liveness", &w.liveness_probe), ("readiness", &w.readiness_probe)];
    let parts: Vec<String> = all
        .into_iter()
        .filter_map(|(name, p)| p.as_ref().map(|p| (name, p)))
        .map(|(name, p)| {
            let handler = if let Some(e) = &p.exec {
                format!("exec [{}]", e.command.join(" "))
            } else if let Some(h) = &p.http_get {
                let path = if h.path.is_empty() { "/" } else { &h.path };
                format!("httpGet {}:{}{path}", h.host.as_deref().unwrap_or("127.0.0.1"), h.port)
            } else if let Some(t) = &p.tcp_socket {
                format!("tcpSocket {}:{}", t.host.as_deref().unwrap_or("127.0.0.1"), t.port)
            } else {
                "selfReport".to_owned()
            };
            format!("{name} {handler} every {}s", p.period().as_secs())
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn selector_text(sel: &ank_common::workload_policy::AgentSelector) -> String {
    let mut parts = Vec::new();
    if !sel.labels.is_empty() {
        parts.push(format!("labels [{}]", sel.labels.join("; ")));
    }
    if !sel.metrics.is_empty() {
        parts.push(format!("metrics [{}]", sel.metrics.join("; ")));
    }
    if !sel.capabilities.is_empty() {
        parts.push(format!("capabilities [{}]", sel.capabilities.join(", ")));
    }
    if !sel.rank.is_empty() {
        let rank: Vec<String> = sel.rank.iter().map(|r| format!("{} x{}", r.metric, r.weight)).collect();
        parts.push(format!("rank [{}]", rank.join(", ")));
    }
    if parts.is_empty() { "any agent".to_owned() } else { parts.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature K8: describe shows scheduling, the instance with its conditions, and the events]
    #[test]
    fn describe_shows_spec_states_and_events() {
        let tree = serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"nav": {
                "runtime": "podman", "runtimeConfig": "image: x", "priority": 2, "effectivePriority": 9,
                "policy": {"preemptEnabled": true},
                "agentSelector": {"labels": ["arch = arm64"]}}}},
            "workloadStates": {"agent_C": {"nav": {"7": {"state": "Running", "subState": "Ok", "generation": 3,
                "observedGeneration": 3,
                "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3, "reason": "Running"}],
                "events": [{"kind": "Scheduled", "reason": "agent_C score 0.83 of 3 candidates", "count": 1,
                            "firstSeen": "t1", "last": "t1"}]}}}}
        });
        let view = StateView::from_tree(&tree).unwrap();
        let spec: Workload = serde_json::from_value(tree["desiredState"]["workloads"]["nav"].clone()).unwrap();
        let text = describe("nav", Some(&spec), &view);
        assert!(text.contains("Priority:         2 (effective 9)"), "{text}");
        assert!(text.contains("Agent selector:   labels [arch = arm64]"), "{text}");
        assert!(text.contains("Policy:           preemptEnabled"), "{text}");
        assert!(text.contains("agent_C  id 7  Running(Ok)  generation 3 (observed 3)"), "{text}");
        assert!(text.contains("Ready"), "{text}");
        assert!(text.contains("agent_C score 0.83 of 3 candidates"), "{text}");
        assert!(!text.contains("Probes:"), "no Probes line without probes: {text}");
    }

    // [test of feature H6]
    #[test]
    fn describe_lists_the_probes_of_a_workload_that_has_some() {
        let spec: Workload = serde_json::from_value(serde_json::json!({
            "runtime": "podman", "runtimeConfig": "image: x",
            "livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 2}}))
        .unwrap();
        let view = StateView::from_tree(&serde_json::json!({})).unwrap();
        let text = describe("web", Some(&spec), &view);
        assert!(
            text.contains(
                "Probes:           liveness exec [cat /tmp/alive] every 10s; readiness httpGet 127.0.0.1:8080/ready every 2s"
            ),
            "{text}"
        );
    }

    // [test of feature: issue 39 `ank describe` shows Reverted with the reason and the generations]
    #[test]
    fn describe_shows_the_update_gate_and_a_revert() {
        let reason = "generation 2 not Ready within 20s (NotAvailable: exit 1); put back generation 1";
        let tree = serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"w": {
                "runtime": "podman", "agent": "A", "runtimeConfig": "image: x",
                "update": {"healthyDeadline": "20s", "autoRevert": true}}}},
            "workloadStates": {"A": {"w": {"7": {"state": "Running", "subState": "Ok", "generation": 3,
                "events": [
                    {"kind": "UpdateHealthy", "reason": "generation 1 Ready for 10s", "count": 1, "firstSeen": "t1", "last": "t1"},
                    {"kind": "Reverted", "reason": reason, "count": 1, "firstSeen": "t2", "last": "t2"}],
                "reverted": {"fromGeneration": 2, "toGeneration": 1, "reason": reason, "at": "t3"}}}}}
        });
        let view = StateView::from_tree(&tree).unwrap();
        let spec: Workload = serde_json::from_value(tree["desiredState"]["workloads"]["w"].clone()).unwrap();
        let text = describe("w", Some(&spec), &view);
        assert!(text.contains("Update gate:      healthyDeadline 20s, minHealthyTime 10s, autoRevert on"), "{text}");
        assert!(text.contains(&format!("Reverted:         {reason} (at t3)")), "{text}");
        assert!(!text.contains("Update healthy:"), "only the newest decision: {text}");
        // A workload without `update` and no gate events shows neither.
        let plain: Workload =
            serde_json::from_value(serde_json::json!({"runtime": "podman", "agent": "A", "runtimeConfig": ""}))
                .unwrap();
        let text = describe("v", Some(&plain), &view);
        assert!(!text.contains("Update gate") && !text.contains("Reverted"), "{text}");
    }

    #[test]
    fn describe_keeps_a_multi_line_podman_error_on_one_short_line() {
        let noise: String =
            (0..12).map(|i| format!("time=\"2026\" level=warning msg=\"line {i} of podman's chatter\"\n")).collect();
        let error =
            format!("{noise}Error: initializing source docker://nosuch: reading manifest latest: manifest unknown\n");
        let tree = serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"nav": {"runtime": "podman", "runtimeConfig": "image: x"}}},
            "workloadStates": {"agent_C": {"nav": {"7": {"state": "Pending", "subState": "StartingFailed",
                "additionalInfo": error, "generation": 1, "observedGeneration": 1,
                "conditions": [{"type": "Applied", "status": "False", "observedGeneration": 1,
                                "reason": "PendingStartingFailed", "message": error}]}}}}
        });
        let view = StateView::from_tree(&tree).unwrap();
        let text = describe("nav", None, &view);
        let longest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(longest <= 200, "a line of {longest} characters:\n{text}");
        assert!(text.contains("Error: initializing source docker://nosuch"), "{text}");
        assert!(!text.contains("line 3 of podman's chatter"), "{text}");
    }
}
