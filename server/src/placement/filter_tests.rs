//! The filter step: each exclusion reason, the order they are checked in,
//! and the Unschedulable summary.

use std::collections::BTreeMap;

use ank_common::workload_policy::AgentSelector;

use super::*;
use crate::placement::PlacementSettings;

struct Agent {
    name: &'static str,
    connected: bool,
    labels: BTreeMap<String, String>,
    capabilities: Vec<String>,
    metrics: BTreeMap<String, f64>,
    reported: bool,
}

impl Agent {
    fn new(name: &'static str, labels: &[(&str, &str)], capabilities: &[&str], metrics: &[(&str, f64)]) -> Self {
        Self {
            name,
            connected: true,
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            metrics: metrics.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            reported: true,
        }
    }

    fn info(&self) -> AgentInfo<'_> {
        AgentInfo {
            name: self.name,
            connected: self.connected,
            labels: &self.labels,
            capabilities: &self.capabilities,
            metrics: &self.metrics,
            reported: self.reported,
        }
    }
}

fn selector(labels: &[&str], metrics: &[&str], capabilities: &[&str]) -> Constraints {
    let s = AgentSelector {
        labels: labels.iter().map(|s| s.to_string()).collect(),
        metrics: metrics.iter().map(|s| s.to_string()).collect(),
        capabilities: capabilities.iter().map(|s| s.to_string()).collect(),
        rank: Vec::new(),
    };
    Constraints::new(&s).unwrap()
}

fn check(c: &Constraints, a: &Agent) -> Result<(), Exclusion> {
    c.check(&a.info(), &PlacementSettings::default_metrics())
}

// [test of feature S2: every operator through the placement filter]
#[test]
fn every_label_operator_filters_agents() {
    let arm = Agent::new("arm", &[("arch", "arm64"), ("ecu", "hpc1")], &[], &[]);
    let x86 = Agent::new("x86", &[("arch", "x86_64"), ("ecu", "zone")], &[], &[]);
    let bare = Agent::new("bare", &[], &[], &[]);
    let cases = [
        ("arch = arm64", [true, false, false]),
        ("arch == arm64", [true, false, false]),
        ("arch is arm64", [true, false, false]),
        ("arch != arm64", [false, true, true]),
        ("arch is not arm64", [false, true, true]),
        ("ecu in (hpc1, hpc2)", [true, false, false]),
        ("ecu in (hpc1,)", [true, false, false]),
        ("ecu not in (hpc1, hpc2)", [false, true, true]),
    ];
    for (text, expected) in cases {
        let c = selector(&[text], &[], &[]);
        let got = [&arm, &x86, &bare].map(|a| check(&c, a).is_ok());
        assert_eq!(got, expected, "{text}");
        for (a, ok) in [&arm, &x86, &bare].iter().zip(expected) {
            if !ok {
                assert_eq!(check(&c, a), Err(Exclusion::Label(text.to_owned())), "{text} on {}", a.name);
            }
        }
    }
}

#[test]
fn each_exclusion_names_its_cause_in_the_order_checked() {
    let c = selector(&["arch = arm64"], &["free_memory_mb >= 512"], &["podman-kube"]);
    let mut a = Agent::new("a", &[("arch", "arm64")], &["podman", "podman-kube"], &[("free_memory_mb", 1024.0)]);
    assert_eq!(check(&c, &a), Ok(()));
    a.metrics.insert("free_memory_mb".into(), 256.0);
    assert_eq!(check(&c, &a), Err(Exclusion::MetricNotMet("free_memory_mb >= 512".into())));
    a.metrics.insert("free_memory_mb".into(), 70_000.0);
    assert_eq!(check(&c, &a), Err(Exclusion::MetricOutOfRange("free_memory_mb".into())), "above 0..65536");
    a.metrics.clear();
    assert_eq!(check(&c, &a), Err(Exclusion::MetricMissing("free_memory_mb".into())));
    // Issue 26, bug 4: before its first load report an agent's metrics are
    // not judged (missing ones are not missing yet).
    a.reported = false;
    assert_eq!(check(&c, &a), Err(Exclusion::NotReported));
    assert_eq!(check(&selector(&["arch = arm64"], &[], &[]), &a), Ok(()), "no metric constraint: nothing to wait for");
    a.capabilities = vec!["podman".into()];
    // [test of feature S6]
    assert_eq!(check(&c, &a), Err(Exclusion::MissingCapability("podman-kube".into())));
    a.labels.clear();
    assert_eq!(check(&c, &a), Err(Exclusion::Label("arch = arm64".into())));
    a.connected = false;
    assert_eq!(check(&c, &a), Err(Exclusion::Offline));
    assert_eq!(Exclusion::MissingCapability("podman-kube".into()).to_string(), "missing capability podman-kube");
    assert_eq!(Exclusion::MetricMissing("free_memory_mb".into()).to_string(), "metric free_memory_mb missing");
    assert_eq!(Exclusion::Label("arch = arm64".into()).to_string(), "label arch = arm64 mismatch");
}

#[test]
fn expressions_are_shown_with_single_spaces() {
    let c = selector(&["  arch   =  arm64 "], &[], &[]);
    let a = Agent::new("a", &[], &[], &[]);
    assert_eq!(check(&c, &a), Err(Exclusion::Label("arch = arm64".into())));
}

// [test of feature S1: the reason lists why each agent was excluded]
#[test]
fn the_summary_counts_and_names_agents_per_reason() {
    let excluded = vec![
        ("agent_A", Exclusion::Label("arch = arm64".into())),
        ("agent_B", Exclusion::Offline),
        ("agent_C", Exclusion::MetricMissing("free_memory_mb".into())),
    ];
    assert_eq!(
        summarize(&excluded),
        "3 agents: 1 offline (agent_B), 1 label arch = arm64 mismatch (agent_A), 1 metric free_memory_mb missing (agent_C)"
    );
    let many: Vec<(&str, Exclusion)> = ["a", "b", "c", "d", "e"].iter().map(|n| (*n, Exclusion::Offline)).collect();
    assert_eq!(summarize(&many), "5 agents: 5 offline (a, b, c and 2 more)");
    assert_eq!(summarize(&many[..1]), "1 agent: 1 offline (a)");
    assert_eq!(summarize(&[]), "no agent known to the server");
    assert_eq!(awaiting(&["agent_X"]), "waiting for the first load report of agent_X");
    assert_eq!(awaiting(&["a", "b", "c", "d"]), "waiting for the first load report of a, b, c and 1 more");
}
