//! The desired state the server holds: validation of a new state, applying
//! an UpdateStateRequest (empty mask = replace, masks = per path) and the
//! diff between two states as per-agent added and deleted workloads.

use std::collections::BTreeMap;

use ank_common::config_renderer::ConfigRenderer;
use ank_common::field_mask;
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{API_VERSION, AgentName, State, Workload, WorkloadName};
use serde_json::{Value, json};

/// A validated desired state together with its rendering: `state` is what
/// users wrote and get back (templates unrendered), `rendered` is what agents
/// run and what diffs compare: templates, group defaults and pipeline order
/// applied, with effective priorities (also written into `state`). The
/// server expands the `${seq:N}` macros of `rendered` once workloads have
/// their agent. With mutating hooks, `rendered` is what the hooks made of
/// the rendering and `pre_hook` the rendering itself, which the next update
/// is compared with (`None`: the same as `rendered`, always without hooks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    pub state: State,
    pub rendered: State,
    pub pre_hook: Option<State>,
}

/// The largest desired state, as encoded on the wire together with its
/// effective state (a complete-state answer carries both): three quarters
/// of what one gRPC message may carry, leaving the rest of the answer for
/// workload states and agents. A larger state could be stored but not read
/// back whole, nor handed to an agent in one ServerHello.
pub const MAX_DESIRED_STATE_BYTES: usize = ank_proto::MAX_MESSAGE_BYTES / 4 * 3;

impl DesiredState {
    /// Validates and renders `state`; the error names the problem.
    pub fn new(mut state: State) -> Result<Self, String> {
        ank_common::manifest::validate_state(&state)?;
        let mut rendered = ConfigRenderer::new().render_state(&state).map_err(|e| e.to_string())?;
        render_scheduling(&mut state, &mut rendered)?;
        let desired = Self { state, rendered, pre_hook: None };
        let size = encoded_size(&desired.state)? + encoded_size(&desired.effective())?;
        if size > MAX_DESIRED_STATE_BYTES {
            return Err(format!(
                "the desired state would take {size} bytes on the wire with its effective state, more than the {MAX_DESIRED_STATE_BYTES} bytes allowed (3/4 of the {} byte message limit)",
                ank_proto::MAX_MESSAGE_BYTES
            ));
        }
        Ok(desired)
    }
}

impl DesiredState {
    /// The rendering before mutating hooks: what a change is detected against.
    pub fn base(&self) -> &State {
        self.pre_hook.as_ref().unwrap_or(&self.rendered)
    }

    /// The effective state, as Ankaios (>= 1.1) shows it: the rendered
    /// workloads the agents get, with the desired state's apiVersion and no
    /// configs (they are rendered into the workloads already).
    // [feature: effectiveState, read-only]
    pub fn effective(&self) -> State {
        State {
            api_version: self.state.api_version.clone(),
            workloads: self.rendered.workloads.clone(),
            ..State::default()
        }
    }
}

/// The scheduling part of rendering: group members checked, group defaults
/// and pipeline order applied (a cycle they close is rejected), effective
/// priorities written.
fn render_scheduling(state: &mut State, rendered: &mut State) -> Result<(), String> {
    ank_common::groups::validate_members(state)?;
    ank_common::groups::render(&state.groups, rendered);
    if let Some(cycle) = ank_common::dependency_graph::find_cycle(rendered) {
        return Err(format!("dependency cycle (with the pipeline order of groups): {}", cycle.join(" -> ")));
    }
    crate::priorities::write(state, rendered);
    Ok(())
}

/// Bytes `state` takes as the desired state of a complete-state message.
fn encoded_size(state: &State) -> Result<usize, String> {
    use prost::Message;
    let tree = json!({ "desiredState": serde_json::to_value(state).map_err(|e| e.to_string())? });
    let pb = ank_common::convert::complete_state_from_json(&tree).map_err(|e| e.to_string())?;
    Ok(pb.encoded_len())
}

/// The spec an agent gets for a workload, or `None` if it is not scheduled.
pub fn spec_of(name: &WorkloadName, wl: &Workload) -> Option<WorkloadSpec> {
    if wl.agent.is_empty() {
        return None;
    }
    let agent = AgentName::new(wl.agent.as_str()).ok()?;
    Some(WorkloadSpec::new(name, &agent, wl.clone()))
}

/// Whether `instance` is exactly an instance the rendered `state` wants
/// (same workload, agent and runtime configuration).
pub fn wants_instance(state: &State, instance: &ank_common::WorkloadInstanceName) -> bool {
    state
        .workloads
        .get_key_value(instance.workload_name.as_str())
        .and_then(|(name, wl)| spec_of(name, wl))
        .is_some_and(|spec| spec.instance_name == *instance)
}

/// Applies an update request to `current`, returning the validated and
/// rendered result.
pub fn apply_update(current: &State, new_state: &Value, update_mask: &[String]) -> Result<DesiredState, String> {
    let new_desired = new_state.get("desiredState");
    let new_version = new_desired.and_then(|d| d.get("apiVersion")).and_then(Value::as_str).unwrap_or("");
    if new_version == ank_common::manifest::DEPRECATED_API_VERSION {
        tracing::warn!("update with the deprecated apiVersion '{new_version}' accepted as '{API_VERSION}'");
    } else if !new_version.is_empty() && new_version != API_VERSION {
        return Err(format!("unsupported apiVersion '{new_version}', expected '{API_VERSION}'"));
    }
    let next = if update_mask.is_empty() {
        let mut desired = new_desired.cloned().unwrap_or_else(|| json!({}));
        if new_version == ank_common::manifest::DEPRECATED_API_VERSION {
            desired["apiVersion"] = json!(API_VERSION);
        }
        serde_json::from_value::<State>(desired).map_err(|e| format!("invalid desired state: {e}"))?
    } else {
        let mut tree = json!({ "desiredState": serde_json::to_value(current).map_err(|e| e.to_string())? });
        let masks: Vec<String> =
            update_mask.iter().filter(|m| m.split('.').next() == Some("desiredState")).cloned().collect();
        // No desired-state mask (e.g. only agent tags): nothing to copy; an
        // empty list would mean "replace everything" to apply_update.
        if !masks.is_empty() {
            field_mask::apply_update(&mut tree, new_state, &masks);
        }
        if let Some(d) = tree.get_mut("desiredState") {
            d["apiVersion"] = json!(API_VERSION);
        }
        let desired = tree.get("desiredState").cloned().unwrap_or_else(|| json!({}));
        serde_json::from_value::<State>(desired).map_err(|e| format!("invalid desired state: {e}"))?
    };
    DesiredState::new(next)
}

/// What changed between two desired states.
#[derive(Debug, Default, PartialEq)]
pub struct StateDiff {
    /// Specs to add, by agent.
    pub added: BTreeMap<String, Vec<WorkloadSpec>>,
    /// Instances to delete, by agent.
    pub deleted: BTreeMap<String, Vec<DeletedWorkload>>,
    /// Newly added workloads without an agent.
    pub unscheduled: Vec<WorkloadName>,
    /// Unscheduled workloads that were removed or moved to an agent.
    pub unscheduled_gone: Vec<WorkloadName>,
    /// Every added instance, unscheduled ones too (`name.id.` with an empty
    /// agent): changed workloads first, then new ones, each by name.
    added_names: Vec<String>,
    /// Every deleted instance, unscheduled ones too, by name.
    deleted_names: Vec<String>,
}

impl StateDiff {
    /// The added instances as UpdateStateSuccess lists them, as in Ankaios.
    pub fn added_instance_names(&self) -> Vec<String> {
        self.added_names.clone()
    }
    /// The deleted instances as UpdateStateSuccess lists them, as in Ankaios.
    pub fn deleted_instance_names(&self) -> Vec<String> {
        self.deleted_names.clone()
    }
}

/// The instance name of a workload, `name.id.` if it has no agent.
pub(crate) fn instance_of(name: &WorkloadName, wl: &Workload) -> ank_common::WorkloadInstanceName {
    match spec_of(name, wl) {
        Some(spec) => spec.instance_name,
        None => ank_common::WorkloadInstanceName::new(name, &AgentName::unscheduled(), &wl.runtime_config),
    }
}

/// Compares two rendered states; a workload whose rendering changed (also
/// through a config item it uses) is deleted and added again.
pub fn diff(old: &State, new: &State) -> StateDiff {
    let mut d = StateDiff::default();
    for (name, old_wl) in &old.workloads {
        if new.workloads.get(name) == Some(old_wl) {
            continue;
        }
        d.deleted_names.push(instance_of(name, old_wl).to_string());
        if let Some(new_wl) = new.workloads.get(name) {
            d.added_names.push(instance_of(name, new_wl).to_string());
        }
        match spec_of(name, old_wl) {
            Some(spec) => d.deleted.entry(spec.instance_name.agent_name.clone()).or_default().push(DeletedWorkload {
                instance_name: spec.instance_name,
                dependencies: delete_conditions(old, name),
            }),
            None => d.unscheduled_gone.push(name.clone()),
        }
    }
    for (name, new_wl) in &new.workloads {
        if old.workloads.get(name) == Some(new_wl) {
            continue;
        }
        if !old.workloads.contains_key(name) {
            d.added_names.push(instance_of(name, new_wl).to_string());
        }
        match spec_of(name, new_wl) {
            Some(spec) => d.added.entry(spec.instance_name.agent_name.clone()).or_default().push(spec),
            None => d.unscheduled.push(name.clone()),
        }
    }
    d
}

/// The delete conditions of `workload` in `state`: every workload that
/// needs it running (ADD_COND_RUNNING) must be neither pending nor running
/// before it is deleted. Other add conditions only matter at start.
pub fn delete_conditions(state: &State, workload: &WorkloadName) -> BTreeMap<String, DeleteCondition> {
    state
        .workloads
        .iter()
        .filter(|(_, wl)| wl.dependencies.get(workload) == Some(&AddCondition::Running))
        .map(|(dependent, _)| (dependent.to_string(), DeleteCondition::NotPendingNorRunning))
        .collect()
}

/// All scheduled workloads of one agent.
pub fn specs_for_agent(state: &State, agent: &str) -> Vec<WorkloadSpec> {
    state.workloads.iter().filter(|(_, wl)| wl.agent == agent).filter_map(|(name, wl)| spec_of(name, wl)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(yaml: &str) -> State {
        ank_common::manifest::parse_manifest("t", yaml).unwrap()
    }

    const TWO: &str = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n  b:\n    runtime: podman\n    agent: B\n    runtimeConfig: y\n";

    #[test]
    fn diff_detects_added_deleted_and_changed() {
        let old = state(TWO);
        let new = state(
            &TWO.replace("runtimeConfig: y", "runtimeConfig: z")
                .replace("  a:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n", ""),
        );
        let d = diff(&old, &new);
        assert_eq!(d.deleted["A"][0].instance_name.workload_name, "a");
        assert_eq!(d.deleted["B"][0].instance_name.workload_name, "b");
        assert_eq!(d.added["B"][0].workload.runtime_config, "z");
        assert!(!d.added.contains_key("A"));
        assert_eq!(diff(&old, &old), StateDiff::default());
    }

    #[test]
    fn diff_names_unscheduled_instances_with_an_empty_agent_changed_first() {
        let old = state(&format!("{TWO}  u:\n    runtime: podman\n    runtimeConfig: old\n"));
        let new = state(&format!(
            "{}  u:\n    runtime: podman\n    runtimeConfig: new\n  n:\n    runtime: podman\n    runtimeConfig: n\n",
            TWO.replace("runtimeConfig: x", "runtimeConfig: x2")
        ));
        let d = diff(&old, &new);
        let id = |w: &str, agent: &str, cfg: &str| {
            ank_common::WorkloadInstanceName::new(
                &WorkloadName::new(w).unwrap(),
                &if agent.is_empty() { AgentName::unscheduled() } else { AgentName::new(agent).unwrap() },
                cfg,
            )
            .to_string()
        };
        assert!(id("u", "", "new").ends_with('.'), "an empty agent leaves a trailing dot");
        assert_eq!(d.added_instance_names(), [id("a", "A", "x2"), id("u", "", "new"), id("n", "", "n")]);
        assert_eq!(d.deleted_instance_names(), [id("a", "A", "x"), id("u", "", "old")]);
    }

    #[test]
    fn update_with_a_dependency_cycle_is_rejected_naming_it() {
        let cur = state(TWO);
        let new = json!({"desiredState": {"apiVersion": "v1", "workloads": {
            "a": {"runtime": "podman", "agent": "A", "runtimeConfig": "x", "dependencies": {"b": "ADD_COND_RUNNING"}},
            "b": {"runtime": "podman", "agent": "B", "runtimeConfig": "y", "dependencies": {"a": "ADD_COND_SUCCEEDED"}},
        }}});
        let err = apply_update(&cur, &new, &[]).unwrap_err();
        assert!(err.contains("dependency cycle: a -> b -> a"), "{err}");
    }

    #[test]
    fn a_desired_state_beyond_the_size_limit_is_refused_naming_sizes() {
        let big = "x".repeat(MAX_DESIRED_STATE_BYTES / 2);
        let one = format!("apiVersion: v1\nconfigs:\n  a: {big}\n");
        assert!(DesiredState::new(state(&one)).is_ok());
        let two = format!("apiVersion: v1\nconfigs:\n  a: {big}\n  b: {big}\n");
        let e = DesiredState::new(state(&two)).unwrap_err();
        assert!(e.starts_with("the desired state would take 31457"), "{e}");
        assert!(e.ends_with("more than the 3145728 bytes allowed (3/4 of the 4194304 byte message limit)"), "{e}");
    }

    #[test]
    fn only_the_exact_desired_instance_is_wanted() {
        let s = state("apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n");
        let (name, wl) = s.workloads.iter().next().unwrap();
        let wanted = spec_of(name, wl).unwrap().instance_name;
        assert!(wants_instance(&s, &wanted));
        let other_config = ank_common::WorkloadInstanceName { id: "0".repeat(64), ..wanted.clone() };
        assert!(!wants_instance(&s, &other_config));
        let other_agent = ank_common::WorkloadInstanceName { agent_name: "B".into(), ..wanted.clone() };
        assert!(!wants_instance(&s, &other_agent));
        let deleted = ank_common::WorkloadInstanceName { workload_name: "gone".into(), ..wanted };
        assert!(!wants_instance(&s, &deleted));
    }

    #[test]
    fn diff_sends_delete_conditions_for_running_dependents() {
        let old = state(
            "apiVersion: v1\nworkloads:\n  db:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n  web:\n    runtime: podman\n    agent: A\n    runtimeConfig: y\n    dependencies:\n      db: ADD_COND_RUNNING\n  job:\n    runtime: podman\n    agent: B\n    runtimeConfig: z\n    dependencies:\n      db: ADD_COND_SUCCEEDED\n",
        );
        let mut new = old.clone();
        new.workloads.retain(|n, _| n.as_str() != "db");
        let d = diff(&old, &new);
        let del = &d.deleted["A"][0];
        assert_eq!(del.instance_name.workload_name, "db");
        assert_eq!(del.dependencies, BTreeMap::from([("web".to_owned(), DeleteCondition::NotPendingNorRunning)]));
    }

    #[test]
    fn update_with_masks_adds_and_deletes_and_validates() {
        let cur = state(TWO);
        let new = json!({"desiredState": {"apiVersion": "v1", "workloads": {"c": {"runtime": "podman", "agent": "A", "runtimeConfig": "q"}}}});
        let next = apply_update(&cur, &new, &["desiredState.workloads.c".into(), "desiredState.workloads.a".into()])
            .unwrap()
            .state;
        assert_eq!(next.workloads.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        let bad = json!({"desiredState": {"apiVersion": "v1", "workloads": {"c": {"runtime": "podman", "agent": "a b", "runtimeConfig": "q"}}}});
        assert!(apply_update(&cur, &bad, &["desiredState.workloads.c".into()]).unwrap_err().contains("a b"));
        let old = json!({"desiredState": {"apiVersion": "v0.1"}});
        assert_eq!(apply_update(&cur, &old, &[]).unwrap().state.api_version, "v1", "v0.1 is read as v1");
        let wrong = json!({"desiredState": {"apiVersion": "v9"}});
        assert!(apply_update(&cur, &wrong, &[]).unwrap_err().contains("v9"));
        let missing = json!({"desiredState": {"apiVersion": "v1", "workloads": {"c": {"agent": "A"}}}});
        assert!(apply_update(&cur, &missing, &["desiredState.workloads.c".into()]).unwrap_err().contains("runtime"));
    }

    const TEMPLATED: &str = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: \"{{where.agent}}\"\n    configs:\n      where: placement\n      p: ports\n    runtimeConfig: \"image: x\\ncommandOptions: [-p, '{{p.web}}:80']\"\n  other:\n    runtime: podman\n    agent: B\n    configs:\n      p: ports\n    runtimeConfig: \"image: y\"\nconfigs:\n  placement:\n    agent: A\n  ports:\n    web: \"8080\"\n";

    #[test]
    fn templates_are_rendered_for_agents_but_kept_in_the_state() {
        let d = DesiredState::new(state(TEMPLATED)).unwrap();
        assert_eq!(d.state.workloads["web"].agent, "{{where.agent}}");
        let specs = specs_for_agent(&d.rendered, "A");
        assert_eq!(specs[0].workload.runtime_config, "image: x\ncommandOptions: [-p, '8080:80']");
        let web = WorkloadName::new("web").unwrap();
        let expected = ank_common::WorkloadInstanceName::new(
            &web,
            &AgentName::new("A").unwrap(),
            "image: x\ncommandOptions: [-p, '8080:80']",
        );
        assert_eq!(specs[0].instance_name, expected, "the id hashes the rendered runtimeConfig");
    }

    #[test]
    fn a_changed_config_item_recreates_only_the_workloads_it_renders_into() {
        let cur = DesiredState::new(state(TEMPLATED)).unwrap();
        let new = json!({"desiredState": {"apiVersion": "v1", "configs": {"ports": {"web": "9090"}}}});
        let next = apply_update(&cur.state, &new, &["desiredState.configs.ports".into()]).unwrap();
        let d = diff(&cur.rendered, &next.rendered);
        assert_eq!(d.deleted_instance_names().len(), 1);
        assert!(d.deleted["A"][0].instance_name.workload_name == "web");
        assert!(d.added["A"][0].workload.runtime_config.contains("9090:80"));
        assert!(!d.added.contains_key("B"), "'other' uses the item but renders the same");
    }

    #[test]
    fn render_errors_and_bad_config_names_reject_the_update() {
        let cur = DesiredState::new(state(TEMPLATED)).unwrap();
        let gone = json!({"desiredState": {"apiVersion": "v1"}});
        let err = apply_update(&cur.state, &gone, &["desiredState.configs.placement".into()]).unwrap_err();
        assert!(err.contains("config item 'placement', which does not exist"), "{err}");
        let missing_key = json!({"desiredState": {"apiVersion": "v1", "configs": {"placement": {"agnt": "A"}}}});
        let err = apply_update(&cur.state, &missing_key, &["desiredState.configs.placement".into()]).unwrap_err();
        assert!(err.contains("where.agent"), "{err}");
        let bad_key = json!({"desiredState": {"apiVersion": "v1", "configs": {"a.b": "x"}}});
        let err = apply_update(&cur.state, &bad_key, &["desiredState.configs".into()]).unwrap_err();
        assert!(err.contains("config key name 'a.b'"), "{err}");
    }

    // [test of feature K3]
    // [test of feature K6]
    #[test]
    fn the_groups_example_renders_defaults_order_and_priorities() {
        let text = include_str!("../../examples/groups.yaml");
        let d = DesiredState::new(state(text)).unwrap();
        let r = &d.rendered.workloads;
        assert_eq!(r["verify"].dependencies.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["flash"]);
        assert_eq!(r["fetch"].effective_priority, Some(5), "flash depends on fetch through the pipeline");
        assert_eq!((r["cleanup"].effective_priority, r["report"].effective_priority), (Some(7), Some(2)));
        assert_eq!(r["cleanup"].agent, "agent_A");
        assert!(r["web"].runtime_config.contains("${seq:8000}"), "the server expands it per agent");
        assert!(d.state.workloads["verify"].dependencies.is_empty());
    }

    #[test]
    fn update_with_only_agent_masks_keeps_the_desired_state() {
        let cur = state(TWO);
        let new = json!({"agents": {"A": {"tags": {"x": "y"}}}});
        assert_eq!(apply_update(&cur, &new, &["agents.A.tags".into()]).unwrap().state, cur);
    }

    #[test]
    fn update_with_empty_mask_replaces_everything() {
        let cur = state(TWO);
        let next = apply_update(&cur, &json!({"desiredState": {"apiVersion": "v1"}}), &[]).unwrap().state;
        assert!(next.workloads.is_empty());
        assert!(apply_update(&cur, &json!({}), &[]).is_err());
    }
}
