//! `ank get workloads [NAME...] [-a AGENT] --rendered [-o yaml|json]`: the
//! workload specs as the server renders them for the agents (templates,
//! group defaults, pipeline order, effective priority, `${seq:N}` numbers),
//! by workload name. Asks the server's rendered-state extension; an
//! Ankaios server does not know it.

use std::collections::BTreeMap;

use ank_common::messages::{RequestContent, ResponseContent};
use anyhow::{Context, bail};

use crate::cli::OutputFormat;
use crate::cmd::Ctx;
use crate::output;

/// The masks that select `names` (all workloads when none).
pub fn masks(names: &[String]) -> Vec<String> {
    if names.is_empty() {
        return vec!["desiredState.workloads".to_owned()];
    }
    names.iter().map(|n| format!("desiredState.workloads.{n}")).collect()
}

/// The rendered workloads of a tree, only those on `agent` if given.
pub fn workloads(tree: &serde_json::Value, agent: Option<&str>) -> BTreeMap<String, serde_json::Value> {
    tree["desiredState"]["workloads"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, wl)| agent.is_none_or(|a| wl["agent"] == a))
        .map(|(name, wl)| (name.clone(), wl.clone()))
        .collect()
}

/// Prints the rendered specs.
// [feature K9: `ank get workload X --rendered` prints the spec the agent gets]
pub async fn run(
    ctx: &mut Ctx<'_>,
    names: &[String],
    agent: Option<&str>,
    format: Option<OutputFormat>,
) -> anyhow::Result<()> {
    let mut conn = ctx.connect().await?;
    let response = conn.request(RequestContent::RenderedState { field_mask: masks(names) }).await;
    conn.goodbye().await;
    let tree = match response.context("the rendered-state request failed")? {
        ResponseContent::CompleteState(state) => state.to_json()?,
        ResponseContent::Error(msg) => bail!("the server rejected the request: {msg}"),
        other => bail!("unexpected answer to a rendered-state request: {other:?}"),
    };
    let found = workloads(&tree, agent);
    if let Some(missing) = names.iter().find(|n| !found.contains_key(n.as_str())) {
        bail!(
            "workload '{missing}' is not in the desired state{}",
            agent.map(|a| format!(" on agent '{a}'")).unwrap_or_default()
        );
    }
    let value = serde_json::to_value(found).context("cannot encode the workloads")?;
    ctx.print(&output::state_tree(&value, format.unwrap_or(OutputFormat::Yaml))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_workloads_are_selected_by_name_and_agent() {
        assert_eq!(masks(&[]), ["desiredState.workloads"]);
        assert_eq!(masks(&["a".into(), "b".into()]), ["desiredState.workloads.a", "desiredState.workloads.b"]);
        let tree = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {
            "a": {"agent": "agent_A", "runtimeConfig": "PORT: 8000"},
            "b": {"agent": "agent_B", "runtimeConfig": "PORT: 8000"},
        }}});
        assert_eq!(workloads(&tree, None).len(), 2);
        let on_a = workloads(&tree, Some("agent_A"));
        assert_eq!(on_a.keys().collect::<Vec<_>>(), ["a"]);
        let text = output::state_tree(&serde_json::to_value(on_a).unwrap(), OutputFormat::Yaml).unwrap();
        assert!(
            text.contains("runtimeConfig: 'PORT: 8000'") || text.contains("runtimeConfig: \"PORT: 8000\""),
            "{text}"
        );
    }
}
