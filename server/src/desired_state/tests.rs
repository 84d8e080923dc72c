//! Tests of the desired state: rendering, updates, diffs.

use serde_json::json;

use super::*;

/// [`super::apply_update`] with the new state written as a JSON tree.
fn apply_update(current: &DesiredState, new: &serde_json::Value, masks: &[String]) -> Result<DesiredState, String> {
    super::apply_update(current, &crate::test_support::typed(new.clone()), masks).map_err(|e| e.to_string())
}

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
    let cur = DesiredState::new(state(TWO)).unwrap();
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
    let e = DesiredState::new(state(&two)).unwrap_err().to_string();
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
    let cur = DesiredState::new(state(TWO)).unwrap();
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
    let next = apply_update(&cur, &new, &["desiredState.configs.ports".into()]).unwrap();
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
    let err = apply_update(&cur, &gone, &["desiredState.configs.placement".into()]).unwrap_err();
    assert!(err.contains("config item 'placement', which does not exist"), "{err}");
    let missing_key = json!({"desiredState": {"apiVersion": "v1", "configs": {"placement": {"agnt": "A"}}}});
    let err = apply_update(&cur, &missing_key, &["desiredState.configs.placement".into()]).unwrap_err();
    assert!(err.contains("where.agent"), "{err}");
    let bad_key = json!({"desiredState": {"apiVersion": "v1", "configs": {"a.b": "x"}}});
    let err = apply_update(&cur, &bad_key, &["desiredState.configs".into()]).unwrap_err();
    assert!(err.contains("config key name 'a.b'"), "{err}");
}

/// The review's chained partials (each includes the one before twice:
/// 2^40 expansions) are refused at once for that update; the state stays
/// as it was and the next update is taken.
#[test]
fn a_template_that_would_take_exponential_time_rejects_only_its_update() {
    let cur = DesiredState::new(state(TEMPLATED)).unwrap();
    let mut t = String::from(r#"{{#*inline "p0"}}x{{/inline}}"#);
    for n in 1..=40 {
        t.push_str(&format!(r#"{{{{#*inline "p{n}"}}}}{{{{> p{m}}}}}{{{{> p{m}}}}}{{{{/inline}}}}"#, m = n - 1));
    }
    t.push_str("{{> p40}}{{p.web}}");
    let bad = json!({"desiredState": {"apiVersion": "v1", "workloads": {"web": {
        "runtime": "podman", "agent": "A", "configs": {"p": "ports"}, "runtimeConfig": t}}}});
    let (tx, rx) = std::sync::mpsc::channel();
    let guarded = cur.clone();
    std::thread::spawn(move || {
        let _ = tx.send(apply_update(&guarded, &bad, &["desiredState.workloads.web".into()]));
    });
    let err = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the render finished").unwrap_err();
    assert!(err.contains("workload 'web'") && err.contains("too much work"), "{err}");
    let next = json!({"desiredState": {"apiVersion": "v1", "configs": {"ports": {"web": "9090"}}}});
    let d = apply_update(&cur, &next, &["desiredState.configs.ports".into()]).unwrap();
    assert!(d.rendered.workloads["web"].runtime_config.contains("9090:80"));
}

// [test of feature K3]
// [test of feature K6]
#[test]
fn the_groups_example_renders_defaults_order_and_priorities() {
    let text = include_str!("../../../examples/groups.yaml");
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
    let cur = DesiredState::new(state(TWO)).unwrap();
    let new = json!({"agents": {"A": {"tags": {"x": "y"}}}});
    assert_eq!(apply_update(&cur, &new, &["agents.A.tags".into()]).unwrap().state, cur.state);
}

#[test]
fn update_with_empty_mask_replaces_everything() {
    let cur = DesiredState::new(state(TWO)).unwrap();
    let next = apply_update(&cur, &json!({"desiredState": {"apiVersion": "v1"}}), &[]).unwrap().state;
    assert!(next.workloads.is_empty());
    assert!(apply_update(&cur, &json!({}), &[]).is_err());
}

/// Every entry update of the templated example, as `ank apply` and `ank
/// delete` send them: (new state, masks).
fn entry_updates() -> Vec<(serde_json::Value, Vec<String>)> {
    let web = |cfg: &str| json!({"runtime": "podman", "agent": "{{where.agent}}", "configs": {"where": "placement", "p": "ports"}, "runtimeConfig": cfg});
    let masks = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (json!({"desiredState": {"workloads": {"web": web("image: z")}}}), masks(&["desiredState.workloads.web"])),
        (json!({"desiredState": {}}), masks(&["desiredState.workloads.other"])),
        (json!({"desiredState": {"configs": {"ports": {"web": "1"}}}}), masks(&["desiredState.configs.ports"])),
        (
            json!({"desiredState": {"configs": {"placement": {"agent": "B"}}}}),
            masks(&["desiredState.configs.placement"]),
        ),
        (
            json!({"desiredState": {"workloads": {"new": {"runtime": "podman", "runtimeConfig": "n", "priority": 4, "dependencies": {"other": "ADD_COND_RUNNING"}}}, "configs": {"extra": "x"}}}),
            masks(&["desiredState.workloads.new", "desiredState.configs.extra", "desiredState.workloads.gone"]),
        ),
        (
            json!({"desiredState": {"workloads": {"web": {"runtime": "podman"}}}}),
            masks(&["desiredState.workloads.web"]),
        ),
        (json!({"desiredState": {"workloads": {"bad name": web("x")}}}), masks(&["desiredState.workloads.bad name"])),
    ]
}

#[test]
fn an_update_of_single_entries_merges_as_the_json_tree_would() {
    let cur = DesiredState::new(state(TEMPLATED)).unwrap();
    for (new, masks) in entry_updates() {
        let typed = apply_update(&cur, &new, &masks);
        // The same update through the JSON tree: masks that are not all
        // single entries take that path.
        let mut tree_masks = masks.clone();
        tree_masks.push("desiredState.workloads.*.unused".to_owned());
        let via_tree = apply_update(&cur, &new, &tree_masks);
        assert_eq!(typed, via_tree, "{new} {masks:?}");
    }
}

#[test]
fn a_successor_state_renders_as_a_fresh_one() {
    let cur = DesiredState::new(state(TEMPLATED)).unwrap();
    for (new, masks) in entry_updates() {
        let Ok(next) = apply_update(&cur, &new, &masks) else { continue };
        let fresh = DesiredState::new(next.state.clone()).unwrap();
        assert_eq!(next, fresh, "{new} {masks:?}");
        // And the successor of the successor (its renderings reused again).
        let again = next.after(next.state.clone()).unwrap();
        assert_eq!(again, fresh, "{new} {masks:?}");
    }
}
