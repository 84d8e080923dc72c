//! One tick of the agent's WorkloadScheduler with 200 queued workloads, as
//! it runs every second while some workload is quota-blocked: 180 ready
//! workloads of five priorities wait for a full quota of 10 (each gets its
//! QuotaBlocked event counted), 20 wait for a dependency, and preemption is
//! evaluated (every running workload has a higher priority, so none is
//! stopped and the queue stays the same from tick to tick).
//!
//! `cargo bench -p ank-agent --bench scheduler`

use std::time::Duration;

use ank_agent::runtime_connectors::RuntimeRegistry;
use ank_agent::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use ank_agent::workload_scheduler::{PreemptionSettings, SchedulerSettings, WorkloadScheduler};
use ank_agent::workload_state_store::WorkloadStateStore;
use ank_common::quota::QuotaLimits;
use ank_common::workload::{AddCondition, Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, WorkloadName, WorkloadState};
use criterion::{Criterion, criterion_group, criterion_main};

const QUEUED: usize = 200;
const SLOTS: u32 = 10;

fn spec(name: &str, priority: u32, dependency: Option<&str>) -> WorkloadSpec {
    let workload = Workload {
        runtime: "podman".into(),
        runtime_config: format!("image: localhost/{name}:1\ncommandOptions: [--memory, 64m]\n"),
        priority: Some(priority),
        dependencies: dependency
            .map(|d| [(WorkloadName::new(d).expect("name"), AddCondition::Running)].into())
            .unwrap_or_default(),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).expect("name"), &AgentName::new("agent_A").expect("agent"), workload)
}

fn create(s: WorkloadSpec) -> WorkloadOperation {
    WorkloadOperation::Create(ReusableWorkloadSpec::new(s))
}

fn scheduler() -> (WorkloadScheduler, WorkloadStateStore) {
    let settings = SchedulerSettings {
        quota: QuotaLimits { max_workloads: SLOTS, max_memory: 0 },
        preemption: PreemptionSettings { enabled: true, delay: Duration::ZERO, ..Default::default() },
        ..Default::default()
    };
    let mut scheduler = WorkloadScheduler::with_settings("agent_A", settings, RuntimeRegistry::with_podman());
    let mut store = WorkloadStateStore::new();
    let running: Vec<WorkloadSpec> = (0..SLOTS).map(|i| spec(&format!("run{i}"), 9, None)).collect();
    scheduler.enqueue_filtered_workload_operations(running.iter().cloned().map(create).collect(), &store);
    for s in &running {
        store.update(&WorkloadState::new(s.instance_name.clone(), ExecutionState::running()));
    }
    let queued = (0..QUEUED).map(|i| {
        let dependency = (i % 10 == 0).then_some("elsewhere");
        create(spec(&format!("wl{i}"), (i % 5) as u32, dependency))
    });
    scheduler.enqueue_filtered_workload_operations(queued.collect(), &store);
    assert_eq!(scheduler.queued(), QUEUED);
    (scheduler, store)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    let _guard = rt.enter();
    let (mut scheduler, store) = scheduler();
    let now = tokio::time::Instant::now() + Duration::from_secs(3600);
    let first = scheduler.tick(&store, now);
    assert!(first.ready.is_empty() && first.preempt.is_empty());
    assert_eq!(first.events.len(), 180, "one QuotaBlocked event per quota-blocked workload");
    c.bench_function("scheduler tick, 200 queued workloads", |b| b.iter(|| scheduler.tick(&store, now).events.len()));
}

criterion_group!(benches, bench);
criterion_main!(benches);
