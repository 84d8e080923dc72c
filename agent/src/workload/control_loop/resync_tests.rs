//! Tests of one control loop on its own: the server's TTL resync of a spec
//! whose creates gave up, as the loop sees it when the manager has not yet
//! taken the report that they did (the two crossed).

use std::sync::Arc;
use std::time::Duration;

use ank_common::execution_state::Pending;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadName};
use tokio::sync::{Semaphore, mpsc};

use crate::control_interface::registry::ControlInterfaces;
use crate::finished_store::FinishedStore;
use crate::runtime_connectors::RuntimeRegistry;
use crate::runtime_connectors::fake::FakeRuntime;
use crate::runtime_facade::RuntimeFacade;
use crate::workload::control_loop::LoopContext;
use crate::workload::object::WorkloadObject;
use crate::workload::policy::RetryPolicy;
use crate::workload::{LoopReport, StateReporter};
use crate::workload_operation::ReusableWorkloadSpec;

struct OneLoop {
    fake: Arc<FakeRuntime>,
    reports: mpsc::Receiver<LoopReport>,
    _io: tempfile::TempDir,
}

impl OneLoop {
    fn new(fake: FakeRuntime) -> (Self, RuntimeFacade) {
        let fake = Arc::new(fake);
        let mut registry = RuntimeRegistry::new();
        registry.register(fake.clone());
        let io = tempfile::tempdir().expect("temp io folder");
        let (reporter, reports) = StateReporter::channel(64);
        let ctx = LoopContext {
            registry: Arc::new(registry),
            reporter,
            create_permits: Arc::new(Semaphore::new(4)),
            runtime_events: mpsc::channel(16).0,
            retry_policy: RetryPolicy { max_retries: 2, interval: Duration::from_secs(1) },
            io_folder: io.path().to_owned(),
            control_interfaces: ControlInterfaces::new(mpsc::unbounded_channel().0),
            retention: Default::default(),
            finished: Arc::new(FinishedStore::open(io.path())),
        };
        let facade = RuntimeFacade::new(fake.clone(), ctx);
        (Self { fake, reports, _io: io }, facade)
    }

    /// The next state the loop reports (events are skipped).
    async fn next_state(&mut self) -> ExecutionState {
        loop {
            let report = tokio::time::timeout(Duration::from_secs(60), self.reports.recv())
                .await
                .expect("no report within 60 s")
                .expect("the loop's reporter is gone");
            if let LoopReport::State(s) = report {
                return s.execution_state;
            }
        }
    }

    async fn until_given_up(&mut self) -> ExecutionState {
        loop {
            let state = self.next_state().await;
            if state.kind == StateKind::Pending(Pending::StartingFailed) {
                return state;
            }
        }
    }
}

fn spec(name: &str) -> WorkloadSpec {
    let wl = Workload {
        agent: "agent_A".into(),
        runtime: "podman".into(),
        runtime_config: format!("image: localhost/{name}:1\n"),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), wl)
}

fn start(facade: &RuntimeFacade, s: &WorkloadSpec) -> WorkloadObject {
    facade.create_workload(ReusableWorkloadSpec::new(s.clone()))
}

#[tokio::test(start_paused = true)]
async fn a_resync_after_the_creates_gave_up_reports_that_again_and_a_rerun_starts_them_over() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::new(fake);
    let s = spec("api");
    let mut object = start(&facade, &s);
    let gave_up = one.until_given_up().await;
    assert_eq!(gave_up.additional_info, "No more retries: Error: image not known");
    assert_eq!(one.fake.created().len(), 3, "one create and 2 retries");

    // The resync crossed that report: the loop answers with it, creates nothing.
    object.resync(s.clone());
    assert_eq!(one.next_state().await, gave_up, "the resync gets the given-up state as its answer");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(one.fake.created().len(), 3, "a resync is no rerun");
    assert!(one.reports.try_recv().is_err(), "nothing else was reported");

    // `ank job rerun` sends the same spec as a plain add: the creates start over.
    object.update(Some(s.clone()));
    let again = one.next_state().await;
    assert_eq!(again, ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Triggered at runtime."));
    assert_eq!(one.until_given_up().await, gave_up);
    assert_eq!(one.fake.created().len(), 6, "the rerun made one create and 2 retries of its own");
}

#[tokio::test(start_paused = true)]
async fn a_resync_while_the_creates_are_retried_keeps_counting() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::new(fake);
    let s = spec("api");
    let mut object = start(&facade, &s);
    one.next_state().await;
    assert_eq!(one.next_state().await.additional_info, "Retry 1 of 2: Error: image not known");
    object.resync(s.clone());
    assert_eq!(one.next_state().await.additional_info, "Retry 1 of 2: Error: image not known");
    one.until_given_up().await;
    assert_eq!(one.fake.created().len(), 3, "the resync did not reset the retries");
}
