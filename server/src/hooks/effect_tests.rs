//! The effect of a chain's answer on the effective state, with answers
//! built by hand (the chains themselves run real executables in
//! `hooks/tests.rs` and the in-process tests).

use super::*;
use ank_proto::grpc_api as g;

fn state(workloads: &[(&str, &str)]) -> State {
    let mut yaml = format!("apiVersion: v1\nworkloads:{}\n", if workloads.is_empty() { " {}" } else { "" });
    for (name, tag) in workloads {
        yaml.push_str(&format!(
            "  {name}:\n    runtime: podman\n    agent: A\n    tags:\n      t: {tag}\n    runtimeConfig: 'image: {name}'\n"
        ));
    }
    ank_common::manifest::parse_manifest("t", &yaml).unwrap()
}

/// An outcome whose answer is `message` changed by `f`.
fn answer(message: &g::UpdateWorkload, f: impl FnOnce(&mut g::UpdateWorkload)) -> HookOutcome {
    let mut output = message.clone();
    f(&mut output);
    HookOutcome { output, changed_by: vec![("h".into(), vec![])] }
}

fn tag(s: &State, name: &str) -> Option<String> {
    s.workloads.get(name).map(|w| w.tags["t"].clone())
}

#[test]
fn hooks_effect_no_change_no_input() {
    assert_eq!(input(&state(&[("a", "x")]), &state(&[("a", "x")])), None);
}

#[test]
fn hooks_effect_mutated_added_workloads_are_taken_and_unchanged_ones_keep_their_effective_version() {
    // `a` was mutated by an earlier chain (effective `m`, rendered `x`).
    let base = state(&[("a", "x")]);
    let effective = state(&[("a", "m")]);
    let next = state(&[("a", "x"), ("b", "x")]);
    let input = input(&base, &next).unwrap();
    assert_eq!(input.message.added_workloads.len(), 1, "only b changed");
    let outcome = answer(&input.message, |u| {
        let tags = u.added_workloads[0].workload.as_mut().unwrap().tags.as_mut().unwrap();
        tags.tags.insert("t".into(), "m".into());
    });
    let out = apply(&effective, &next, &input, outcome).unwrap();
    assert_eq!((tag(&out, "a"), tag(&out, "b")), (Some("m".into()), Some("m".into())));
}

#[test]
fn hooks_effect_a_dropped_added_workload_is_gone_and_a_kept_deleted_one_stays() {
    let base = state(&[("old", "x"), ("changed", "x")]);
    let next = state(&[("changed", "y"), ("new", "x")]);
    let input = input(&base, &next).unwrap();
    // Drops every added workload and every deletion.
    let outcome = answer(&input.message, |u| *u = g::UpdateWorkload::default());
    let out = apply(&base, &next, &input, outcome).unwrap();
    assert_eq!(tag(&out, "new"), None, "not deployed");
    assert_eq!(tag(&out, "old"), Some("x".into()), "not deleted");
    assert_eq!(tag(&out, "changed"), Some("x".into()), "neither deleted nor replaced");
    // Only the deletions dropped: the changed workload's new version goes
    // out, the deleted one stays.
    let outcome = answer(&input.message, |u| u.deleted_workloads.clear());
    let out = apply(&base, &next, &input, outcome).unwrap();
    assert_eq!(
        (tag(&out, "old"), tag(&out, "changed"), tag(&out, "new")),
        (Some("x".into()), Some("y".into()), Some("x".into()))
    );
}

#[test]
fn hooks_effect_unhooked_changes_take_the_rendering_and_keep_other_mutations() {
    let base = state(&[("a", "x"), ("b", "x")]);
    let effective = state(&[("a", "m"), ("b", "m")]);
    let next = state(&[("a", "x"), ("b", "y")]);
    let out = unhooked(&effective, &next, &input(&base, &next).unwrap());
    assert_eq!((tag(&out, "a"), tag(&out, "b")), (Some("m".into()), Some("y".into())));
}

#[test]
fn hooks_effect_an_answer_with_a_cycle_or_a_bad_name_is_refused() {
    let base = state(&[]);
    let next = state(&[("a", "x"), ("b", "x")]);
    let input = input(&base, &next).unwrap();
    let outcome = answer(&input.message, |u| {
        for (i, other) in [(0, "b"), (1, "a")] {
            let deps = u.added_workloads[i].workload.as_mut().unwrap().dependencies.get_or_insert_default();
            deps.dependencies.insert(other.into(), ank_proto::ank_base::AddCondition::AddCondRunning as i32);
        }
    });
    let e = apply(&base, &next, &input, outcome).unwrap_err().to_string();
    assert!(e.contains("dependency cycle"), "{e}");
    let outcome = answer(&input.message, |u| {
        u.added_workloads[0].instance_name.as_mut().unwrap().workload_name = "a b".into();
    });
    let e = apply(&base, &next, &input, outcome).unwrap_err().to_string();
    assert!(e.starts_with("the answer of the mutating hooks h is invalid: "), "{e}");
}
