//! Placement decision time: 1000 workloads with agent selectors (two label
//! constraints, a metric constraint, a capability and two rank terms)
//! placed over 50 connected agents, as the server does when it places a
//! whole manifest: parse each selector, filter every agent, rank the
//! candidates, break ties.
//!
//! `cargo bench -p ank-server --bench placement`

use std::collections::BTreeMap;

use ank_common::workload_policy::{AgentSelector, RankTerm};
use ank_server::placement::{AgentInfo, Decision, PlacementSettings, Placer};
use criterion::{Criterion, criterion_group, criterion_main};

const WORKLOADS: usize = 1000;
const AGENTS: usize = 50;

struct Agent {
    name: String,
    labels: BTreeMap<String, String>,
    capabilities: Vec<String>,
    metrics: BTreeMap<String, f64>,
}

fn agents() -> Vec<Agent> {
    (0..AGENTS)
        .map(|i| Agent {
            name: format!("agent_{i:02}"),
            labels: BTreeMap::from([
                ("arch".to_owned(), if i % 2 == 0 { "arm64" } else { "x86_64" }.to_owned()),
                ("zone".to_owned(), format!("z{}", i % 5)),
                ("asil".to_owned(), if i % 7 == 0 { "D" } else { "B" }.to_owned()),
            ]),
            capabilities: if i % 3 == 0 { vec!["podman".into(), "podman-kube".into()] } else { vec!["podman".into()] },
            metrics: BTreeMap::from([
                ("cpu_usage".to_owned(), (i * 13 % 100) as f64),
                ("free_memory_mb".to_owned(), (256 + i * 97 % 4096) as f64),
            ]),
        })
        .collect()
}

fn selectors() -> Vec<AgentSelector> {
    (0..WORKLOADS)
        .map(|i| AgentSelector {
            labels: vec![
                if i % 2 == 0 { "arch = arm64" } else { "arch != arm64" }.to_owned(),
                format!("zone in (z{}, z{})", i % 5, (i + 1) % 5),
            ],
            metrics: vec!["free_memory_mb >= 512".to_owned()],
            capabilities: vec![if i % 10 == 0 { "podman-kube" } else { "podman" }.to_owned()],
            rank: vec![
                RankTerm { metric: "free_memory_mb".into(), weight: 1.0 },
                RankTerm { metric: "cpu_usage".into(), weight: 0.5 },
            ],
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let agents = agents();
    let infos: Vec<AgentInfo<'_>> = agents
        .iter()
        .map(|a| AgentInfo {
            name: &a.name,
            connected: true,
            labels: &a.labels,
            capabilities: &a.capabilities,
            metrics: &a.metrics,
            reported: true,
        })
        .collect();
    let selectors = selectors();
    let mut placer = Placer::new(PlacementSettings { seed: 42, ..PlacementSettings::default() });
    let placed = selectors.iter().filter(|s| matches!(placer.decide(s, None, &infos), Decision::Placed { .. })).count();
    eprintln!("{placed} of {WORKLOADS} workloads placeable over {AGENTS} agents");
    c.bench_function("placement, 1000 workloads over 50 agents", |b| {
        b.iter(|| {
            selectors.iter().filter(|s| matches!(placer.decide(s, None, &infos), Decision::Placed { .. })).count()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
