//! One job step over a job of 1000 workloads, as the server runs it after
//! every state report while the job is unfinished: classify every open
//! item (state lookup, dependency check) and decide the phase.
//!
//! `cargo bench -p ank-server --bench jobs`

use std::collections::BTreeMap;

use ank_common::workload::AddCondition;
use ank_common::{StateKind, WorkloadInstanceName};
use ank_server::jobs::{JobEngine, JobSettings, JobView, NewItem};
use criterion::{Criterion, criterion_group, criterion_main};

const WORKLOADS: usize = 1000;

/// Every instance is starting; every dependency is met.
struct Starting;

impl JobView for Starting {
    fn instance(&self, _: &WorkloadInstanceName) -> Option<(StateKind, u64)> {
        Some((StateKind::Pending(ank_common::execution_state::Pending::Starting), 1))
    }
    fn dependency(&self, _: &str, _: AddCondition) -> Result<(), String> {
        Ok(())
    }
    fn away(&self, _: &str) -> Option<String> {
        None
    }
}

fn engine() -> JobEngine {
    let mut yaml = String::from("apiVersion: v1\nworkloads:\n");
    for i in 0..WORKLOADS {
        let dep =
            if i > 0 { format!("    dependencies:\n      wl{}: ADD_COND_RUNNING\n", i - 1) } else { String::new() };
        yaml.push_str(&format!(
            "  wl{i}:\n    runtime: podman\n    agent: agent{}\n{dep}    runtimeConfig: x{i}\n",
            i % 50
        ));
    }
    let state = ank_common::manifest::parse_manifest("bench", &yaml).expect("valid bench manifest");
    let items: BTreeMap<String, (NewItem, u64)> = state
        .workloads
        .iter()
        .map(|(name, wl)| {
            let spec = ank_server::desired_state::spec_of(name, wl).expect("scheduled");
            (name.to_string(), (NewItem { add: Some(spec), triggered: true, ..NewItem::default() }, 1))
        })
        .collect();
    let mut engine = JobEngine::new(JobSettings::default());
    engine.create(items);
    engine
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    let _guard = rt.enter();
    let mut e = engine();
    c.bench_function("job step, 1000 workloads in progress", |b| {
        b.iter(|| e.step(&Starting, tokio::time::Instant::now()).len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
