//! Whole decisions: filter, rank and tie-break together (features S1, S3,
//! S5, S6).

use std::collections::BTreeMap;

use ank_common::workload_policy::{AgentSelector, RankTerm};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn metrics(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn settings() -> PlacementSettings {
    PlacementSettings { seed: 42, ..PlacementSettings::default() }
}

fn info<'a>(
    name: &'a str,
    connected: bool,
    labels: &'a BTreeMap<String, String>,
    caps: &'a [String],
    metrics: &'a BTreeMap<String, f64>,
) -> AgentInfo<'a> {
    AgentInfo { name, connected, labels, capabilities: caps, metrics, reported: true }
}

// [test of feature S1]
#[test]
fn arm64_lands_on_the_connected_arm64_agent_and_else_lists_every_exclusion() {
    let (x86, arm) = (labels(&[("arch", "x86_64")]), labels(&[("arch", "arm64")]));
    let m = metrics(&[("free_memory_mb", 2048.0)]);
    let caps = vec!["podman".to_owned()];
    let agents = [
        info("agent_A", true, &x86, &caps, &m),
        info("agent_B", false, &arm, &caps, &m),
        info("agent_C", true, &arm, &caps, &m),
    ];
    let c = Constraints::new(&AgentSelector { labels: vec!["arch = arm64".into()], ..Default::default() }).unwrap();
    let mut rng = SplitMix64::new(42);
    let d = decide(&c, None, &agents, &settings(), &mut rng);
    assert!(matches!(&d, Decision::Placed { agent, candidates: 1, .. } if agent == "agent_C"), "{d:?}");
    assert_eq!(d.scheduled_reason().unwrap(), "agent_C score 0.00 of 1 candidate");
    let stopped = [agents[0], agents[1], info("agent_C", false, &arm, &caps, &m)];
    assert_eq!(
        decide(&c, Some("agent_C"), &stopped, &settings(), &mut rng),
        Decision::Unschedulable {
            reason: "3 agents: 2 offline (agent_B, agent_C), 1 label arch = arm64 mismatch (agent_A)".into()
        }
    );
}

// [test of feature S3]
#[test]
fn more_free_memory_wins_with_the_configured_range() {
    let mut s = settings();
    s.metrics.insert("free_memory_mb".into(), MetricRange::new(0.0, 8192.0, true).unwrap());
    let (ma, mb) = (metrics(&[("free_memory_mb", 1024.0)]), metrics(&[("free_memory_mb", 4096.0)]));
    let none = labels(&[]);
    let agents = [info("agent_A", true, &none, &[], &ma), info("agent_B", true, &none, &[], &mb)];
    let rank = vec![RankTerm { metric: "free_memory_mb".into(), weight: 1.0 }];
    let c = Constraints::new(&AgentSelector { rank, ..Default::default() }).unwrap();
    let d = decide(&c, None, &agents, &s, &mut SplitMix64::new(1));
    let Decision::Placed { agent, score, candidates, .. } = &d else { panic!("{d:?}") };
    assert_eq!((agent.as_str(), *candidates), ("agent_B", 2));
    assert!((score - 0.5 / 1.1).abs() < 1e-12, "0.5 normalized, weighted with stickiness 0.1: {score}");
    assert_eq!(d.scheduled_reason().unwrap(), "agent_B score 0.45 of 2 candidates");
}

// [test of feature S5]
#[test]
fn three_identical_agents_share_300_placements_and_a_seed_replays_them() {
    let none = labels(&[]);
    let m = metrics(&[]);
    let agents = [
        info("agent_A", true, &none, &[], &m),
        info("agent_B", true, &none, &[], &m),
        info("agent_C", true, &none, &[], &m),
    ];
    let c = Constraints::new(&AgentSelector::default()).unwrap();
    let run = |seed: u64| {
        let mut rng = SplitMix64::new(seed);
        let s = PlacementSettings { seed, ..settings() };
        (0..300)
            .map(|_| match decide(&c, None, &agents, &s, &mut rng) {
                Decision::Placed { agent, .. } => agent,
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    let first = run(42);
    let counts: BTreeMap<&str, usize> = first.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(a.as_str()).or_default() += 1;
        m
    });
    eprintln!("seed 42, 300 placements: {counts:?}");
    assert_eq!(counts.len(), 3);
    assert!(counts.values().all(|n| (80..=120).contains(n)), "{counts:?}");
    assert_eq!(run(42), first, "the same seed gives the same sequence");
    assert_ne!(run(7), first, "another seed another one");
}

// [test of feature S6]
#[test]
fn a_missing_runtime_capability_makes_the_workload_unschedulable() {
    let none = labels(&[]);
    let m = metrics(&[]);
    let podman = vec!["podman".to_owned()];
    let agents = [info("agent_A", true, &none, &podman, &m), info("agent_B", true, &none, &podman, &m)];
    let c =
        Constraints::new(&AgentSelector { capabilities: vec!["podman-kube".into()], ..Default::default() }).unwrap();
    let d = decide(&c, None, &agents, &settings(), &mut SplitMix64::new(1));
    assert_eq!(
        d,
        Decision::Unschedulable { reason: "2 agents: 2 missing capability podman-kube (agent_A, agent_B)".into() }
    );
    let kube = vec!["podman".to_owned(), "podman-kube".to_owned()];
    let agents = [agents[0], info("agent_K", true, &none, &kube, &m)];
    let d = decide(&c, None, &agents, &settings(), &mut SplitMix64::new(1));
    assert!(matches!(d, Decision::Placed { ref agent, .. } if agent == "agent_K"), "{d:?}");
}

#[test]
fn the_current_agent_reports_its_score_or_why_it_was_excluded() {
    let (arm, x86) = (labels(&[("arch", "arm64")]), labels(&[("arch", "x86_64")]));
    let m = metrics(&[]);
    let agents = [info("agent_A", true, &x86, &[], &m), info("agent_B", true, &arm, &[], &m)];
    let c = Constraints::new(&AgentSelector { labels: vec!["arch = arm64".into()], ..Default::default() }).unwrap();
    let d = decide(&c, Some("agent_A"), &agents, &settings(), &mut SplitMix64::new(1));
    let Decision::Placed { agent, current_score, current_excluded, .. } = d else { panic!() };
    assert_eq!((agent.as_str(), current_score), ("agent_B", None));
    assert_eq!(current_excluded, Some(Exclusion::Label("arch = arm64".into())));
    let d = decide(&c, Some("agent_B"), &agents, &settings(), &mut SplitMix64::new(1));
    assert!(matches!(d, Decision::Placed { current_score: Some(s), .. } if s == 1.0), "stickiness alone: {d:?}");
}

#[test]
fn metric_ranges_are_checked_and_normalize_both_ways() {
    assert!(MetricRange::new(1.0, 1.0, true).is_err());
    assert!(MetricRange::new(f64::NAN, 1.0, true).is_err());
    let r = MetricRange::new(0.0, 100.0, false).unwrap();
    assert_eq!((r.normalize(25.0), r.normalize(101.0), r.normalize(-1.0)), (Some(0.75), None, None));
}

// Issue 26, bug 4: an agent that has not sent its first load report is not
// judged by metric constraints; a workload only it may fit awaits the report
// instead of being unschedulable, and one another agent fits is placed there.
#[test]
fn a_workload_only_an_unreported_agent_may_fit_awaits_its_report() {
    let none = labels(&[]);
    let (slow, unknown) = (metrics(&[("speed", 1.0)]), metrics(&[]));
    let c = Constraints::new(&AgentSelector { metrics: vec!["speed >= 5".into()], ..Default::default() }).unwrap();
    let x = AgentInfo { reported: false, ..info("agent_X", true, &none, &[], &unknown) };
    let agents = [info("agent_A", true, &none, &[], &slow), x];
    assert_eq!(
        decide(&c, None, &agents, &settings(), &mut SplitMix64::new(1)),
        Decision::AwaitingReport { reason: "waiting for the first load report of agent_X".into() }
    );
    let fast = metrics(&[("speed", 9.0)]);
    let agents = [info("agent_B", true, &none, &[], &fast), x];
    let d = decide(&c, None, &agents, &settings(), &mut SplitMix64::new(1));
    assert!(matches!(d, Decision::Placed { ref agent, candidates: 1, .. } if agent == "agent_B"), "{d:?}");
    let reported = [info("agent_A", true, &none, &[], &slow), info("agent_X", true, &none, &[], &unknown)];
    assert_eq!(
        decide(&c, None, &reported, &settings(), &mut SplitMix64::new(1)),
        Decision::Unschedulable {
            reason: "2 agents: 1 metric speed missing (agent_X), 1 metric speed >= 5 not met (agent_A)".into()
        }
    );
}
