use std::time::Duration;

use ank_common::Workload;
use ank_common::health_spec::UpdateGate;
use tokio::time::Instant;

use super::*;

fn spec(image: &str, gate: Option<(&str, &str, bool)>) -> Workload {
    Workload {
        runtime: "podman".into(),
        agent: "A".into(),
        runtime_config: format!("image: {image}"),
        update: gate.map(|(deadline, min, revert)| UpdateGate {
            healthy_deadline: Some(deadline.into()),
            min_healthy_time: Some(min.into()),
            auto_revert: Some(revert),
        }),
        ..Workload::default()
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// v1 (no gate) seen Ready, then v2 with a gate of 60s / 10s.
fn v1_healthy_then_v2(revert: bool) -> (HealthGates, Workload, Workload, Instant) {
    let mut g = HealthGates::default();
    let t0 = Instant::now();
    let v1 = spec("v1", None);
    assert!(!g.spec_changed("w", 1, &v1, t0), "no update: no gate");
    g.observe("w", 1, Seen::Ready, &v1, t0);
    assert_eq!(g.last_healthy("w").map(|h| h.generation), Some(1));
    let v2 = spec("v2", Some(("60s", "10s", revert)));
    assert!(g.spec_changed("w", 2, &v2, t0), "a gate opened");
    (g, v1, v2, t0)
}

#[tokio::test(start_paused = true)]
async fn gate_passes_after_min_healthy_time_without_a_break() {
    let (mut g, v1, v2, t0) = v1_healthy_then_v2(true);
    assert!(g.observe("w", 2, Seen::NotReady("GenerationPending".into()), &v2, t0 + secs(1)));
    assert!(!g.observe("w", 2, Seen::NotReady("GenerationPending".into()), &v2, t0 + secs(1)), "nothing new");
    assert!(g.observe("w", 2, Seen::Ready, &v2, t0 + secs(2)));
    assert!(!g.observe("w", 2, Seen::Ready, &v2, t0 + secs(3)), "still Ready: since 2s");
    assert!(g.due(t0 + secs(11)).is_empty(), "Ready for 9s of 10s");
    g.observe("w", 2, Seen::NotReady("NotAvailable: exit 1".into()), &v2, t0 + secs(11));
    g.observe("w", 2, Seen::Ready, &v2, t0 + secs(12));
    assert!(g.due(t0 + secs(21)).is_empty(), "a break starts the count over");
    assert_eq!(g.open_for("w", 2).unwrap(), "update gate: Ready, to stay so for 10s (deadline 60s)");
    assert_eq!(g.open_for("w", 1), None, "another generation is not gated");
    let out = g.due(t0 + secs(22));
    assert_eq!(
        out,
        vec![Outcome::Passed { workload: "w".into(), generation: 2, reason: "generation 2 Ready for 10s".into() }]
    );
    assert!(!g.is_open("w"));
    assert_eq!(g.last_healthy("w").unwrap().spec, v2, "the new spec is the last healthy one");
    // A re-apply of v1 now is a change like any other: v1 has no gate.
    assert!(!g.spec_changed("w", 3, &v1, t0 + secs(30)));
}

#[tokio::test(start_paused = true)]
async fn gate_fails_at_the_deadline_and_names_what_to_put_back() {
    let (mut g, v1, v2, t0) = v1_healthy_then_v2(true);
    g.observe("w", 2, Seen::NotReady("NotAvailable: readinessProbe failed: HTTP 500".into()), &v2, t0 + secs(5));
    assert!(g.due(t0 + secs(59)).is_empty());
    assert_eq!(
        g.open_for("w", 2).unwrap(),
        "update gate: not Ready (NotAvailable: readinessProbe failed: HTTP 500) (deadline 60s)"
    );
    let out = g.due(t0 + secs(60));
    let Outcome::Failed { workload, generation, reason, revert } = &out[0] else { panic!("{out:?}") };
    assert_eq!((workload.as_str(), *generation), ("w", 2));
    assert_eq!(
        reason,
        "generation 2 not Ready within 60s (NotAvailable: readinessProbe failed: HTTP 500); put back generation 1"
    );
    assert_eq!(revert.as_ref().unwrap().spec, v1);
    // The revert writes v1 back: known healthy, no gate opens.
    assert!(!g.spec_changed("w", 3, &v1, t0 + secs(60)));
    assert!(!g.is_open("w"));
    assert_eq!(g.last_healthy("w").unwrap().generation, 3, "v1 is healthy at its new generation");
}

#[tokio::test(start_paused = true)]
async fn gate_without_auto_revert_or_healthy_spec_only_reports() {
    let (mut g, _, v2, t0) = v1_healthy_then_v2(false);
    g.observe("w", 2, Seen::Ready, &v2, t0 + secs(55));
    let out = g.due(t0 + secs(60));
    assert_eq!(
        out,
        vec![Outcome::Failed {
            workload: "w".into(),
            generation: 2,
            reason: "generation 2 not Ready for 10s within 60s (Ready since 5s); autoRevert is off, nothing put back"
                .into(),
            revert: None
        }]
    );
    // Never Ready before: nothing to put back.
    let mut g = HealthGates::default();
    assert!(g.spec_changed("n", 1, &spec("v1", Some(("20s", "5s", true))), t0));
    let out = g.due(t0 + secs(20));
    assert!(
        matches!(&out[0], Outcome::Failed { reason, revert: None, .. }
            if reason == "generation 1 not Ready within 20s (no report yet); no healthy generation to put back"),
        "{out:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_newer_generation_replaces_the_gate_and_keeps_the_revert_target() {
    let (mut g, v1, _, t0) = v1_healthy_then_v2(true);
    let v3 = spec("v3", Some(("60s", "10s", true)));
    g.observe("w", 3, Seen::Ready, &v3, t0 + secs(1));
    assert!(g.spec_changed("w", 3, &v3, t0 + secs(2)));
    let out = g.due(t0 + secs(62));
    assert!(matches!(&out[0], Outcome::Failed { generation: 3, revert: Some(h), .. } if h.spec == v1), "{out:?}");
    // A change to a spec without `update` closes an open gate.
    let (mut g, _, _, t0) = v1_healthy_then_v2(true);
    assert!(g.spec_changed("w", 3, &spec("v3", None), t0));
    assert!(!g.is_open("w"));
    let (mut g, _, _, _) = v1_healthy_then_v2(true);
    assert!(g.removed("w"));
    assert!(g.last_healthy("w").is_none());
}

#[tokio::test(start_paused = true)]
async fn saved_gates_restart_with_a_fresh_deadline_at_the_new_numbering() {
    let (g, v1, v2, _) = v1_healthy_then_v2(true);
    let saved = g.saved();
    assert_eq!(saved.len(), 1);
    let dir = tempfile::tempdir().unwrap();
    let file = file::GateFile::next_to(&crate::state_file::StateFile::new(dir.path().join("state.json")));
    file.save(saved).unwrap();
    assert!(dir.path().join("state.gates.json").exists());
    tokio::time::advance(secs(100)).await;
    let t1 = Instant::now();
    let mut restarted = HealthGates::default();
    // After a restart generations count from 1 again.
    let v2_now = v2.clone();
    restarted.restore(file.load(), |name| (name == "w").then(|| (1, v2_now.clone())), t1);
    assert!(restarted.is_open("w"));
    assert!(restarted.due(t1 + secs(59)).is_empty(), "a fresh deadline");
    let out = restarted.due(t1 + secs(60));
    assert!(matches!(&out[0], Outcome::Failed { generation: 1, revert: Some(h), .. } if h.spec == v1), "{out:?}");
    file.save(restarted.saved()).unwrap();
    assert!(!dir.path().join("state.gates.json").exists(), "no open gate: no file");
    // A gate whose spec changed while the server was down is dropped.
    let mut other = HealthGates::default();
    other.restore(g.saved(), |_| Some((1, spec("v9", None))), t1);
    assert!(!other.is_open("w"));
}

#[tokio::test(start_paused = true)]
async fn a_settled_healthy_workload_is_not_looked_at_until_its_generation_or_gate_changes() {
    let mut g = HealthGates::default();
    let t0 = Instant::now();
    let v1 = spec("v1", None);
    assert!(g.wants_to_see("w", 1), "not known healthy yet");
    g.observe("w", 1, Seen::NotReady(String::new()), &v1, t0);
    assert!(g.wants_to_see("w", 1), "still not healthy");
    g.observe("w", 1, Seen::Ready, &v1, t0);
    assert!(!g.wants_to_see("w", 1), "healthy at its generation: nothing a tick could change");
    assert!(g.wants_to_see("w", 2), "a new generation is looked at");
    let v2 = spec("v2", Some(("60s", "10s", true)));
    g.spec_changed("w", 2, &v2, t0);
    assert!(g.wants_to_see("w", 2), "an open gate is followed");
}
