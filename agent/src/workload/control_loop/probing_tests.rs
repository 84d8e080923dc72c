//! A control loop with probes on the fake runtime (its scripted
//! `FakeProbes`), under paused time: the readiness is announced before the
//! Running state, a liveness failure restarts the container under
//! ALWAYS and stops it for good under NEVER (with an Unhealthy event
//! carrying the probe's output), a change of only the probes keeps the
//! container and probes with the new settings, and a workload without
//! probes reports exactly what it did before.

use std::sync::Arc;
use std::time::Duration;

use ank_common::execution_state::Failed;
use ank_common::health_spec::Probe;
use ank_common::workload::{RestartPolicy, Workload, WorkloadSpec};
use ank_common::workload_events::EventKind;
use ank_common::{AgentName, StateKind, WorkloadName};
use tokio::sync::mpsc;

use crate::probes::Readiness;
use crate::probes::fake::Answer;
use crate::runtime_connectors::RuntimeRegistry;
use crate::runtime_connectors::fake::FakeRuntime;
use crate::runtime_manager::runtime_facade::RuntimeFacade;
use crate::workload::LoopReport;
use crate::workload::StateReporter;
use crate::workload::control_loop::LoopContext;
use crate::workload::object::WorkloadObject;
use crate::workload_operation::ReusableWorkloadSpec;

struct Probed {
    fake: Arc<FakeRuntime>,
    reports: mpsc::Receiver<LoopReport>,
    facade: RuntimeFacade,
    _io: tempfile::TempDir,
}

/// A report, simplified for comparing.
#[derive(Debug, Clone, PartialEq, Eq)]
enum R {
    State(StateKind, String),
    Readiness(Option<Readiness>),
    Event(EventKind, String),
}

impl Probed {
    fn new() -> Self {
        let fake = Arc::new(FakeRuntime::like_podman());
        let mut registry = RuntimeRegistry::new();
        registry.register(fake.clone());
        let io = tempfile::tempdir().expect("temp io folder");
        let (reporter, reports) = StateReporter::channel(64);
        let ctx = LoopContext::for_tests(registry, reporter, io.path(), Default::default());
        let facade = RuntimeFacade::new(fake.clone(), ctx);
        Self { fake, reports, facade, _io: io }
    }

    fn start(&self, s: &WorkloadSpec) -> WorkloadObject {
        self.facade.create_workload(ReusableWorkloadSpec::new(s.clone()))
    }

    async fn next(&mut self) -> R {
        let report = tokio::time::timeout(Duration::from_secs(600), self.reports.recv())
            .await
            .expect("no report within 600 s")
            .expect("the loop's reporter is gone");
        match report {
            LoopReport::State(s) => R::State(s.execution_state.kind, s.execution_state.additional_info),
            LoopReport::Readiness(_, r) => R::Readiness(r),
            LoopReport::Event(e) => R::Event(e.kind, e.reason),
            LoopReport::Deleted(_) => panic!("unexpected delete"),
        }
    }

    /// Everything reported until (and with) `last`.
    async fn until(&mut self, last: impl Fn(&R) -> bool) -> Vec<R> {
        let mut seen = Vec::new();
        loop {
            let r = self.next().await;
            let done = last(&r);
            seen.push(r);
            if done {
                return seen;
            }
        }
    }
}

fn probe(yaml: &str) -> Probe {
    serde_saphyr::from_str(yaml).unwrap()
}

fn spec(name: &str, policy: RestartPolicy, set: impl FnOnce(&mut Workload)) -> WorkloadSpec {
    let mut wl = Workload {
        agent: "agent_A".into(),
        runtime: "podman".into(),
        runtime_config: format!("image: localhost/{name}:1\n"),
        restart_policy: policy,
        ..Default::default()
    };
    set(&mut wl);
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), wl)
}

fn starting() -> R {
    R::State(StateKind::Pending(ank_common::execution_state::Pending::Starting), "Triggered at runtime.".into())
}

fn running() -> R {
    R::State(StateKind::Running, String::new())
}

#[tokio::test(start_paused = true)]
async fn readiness_is_unknown_before_the_running_state_and_follows_the_probe() {
    let mut t = Probed::new();
    t.fake.probes().answer("http:8080", Answer::Fail("HTTP GET 127.0.0.1:8080/: connection refused".into()));
    let s = spec("web", RestartPolicy::Never, |w| {
        w.readiness_probe = Some(probe("httpGet: {port: 8080}\nperiodSeconds: 1\nfailureThreshold: 2"))
    });
    let _object = t.start(&s);
    assert_eq!(
        t.until(|r| matches!(r, R::Readiness(Some(Readiness::NotReady(_))))).await,
        [
            starting(),
            R::Readiness(Some(Readiness::Unknown)),
            running(),
            R::Event(
                EventKind::Unhealthy,
                "readinessProbe failed 2 times: HTTP GET 127.0.0.1:8080/: connection refused".into()
            ),
            R::Readiness(Some(Readiness::NotReady("HTTP GET 127.0.0.1:8080/: connection refused".into()))),
        ]
    );
    t.fake.probes().answer("http:8080", Answer::Pass);
    assert_eq!(t.next().await, R::Readiness(Some(Readiness::Ready)));
    assert_eq!(t.fake.created().len(), 1, "readiness never restarts");
}

#[tokio::test(start_paused = true)]
async fn a_liveness_failure_restarts_the_container_under_always_with_an_unhealthy_event() {
    let mut t = Probed::new();
    let out = "exec [cat /tmp/alive] exit 1: cat: can't open '/tmp/alive': No such file or directory";
    t.fake.probes().answer("exec:cat /tmp/alive", Answer::Fail(out.into()));
    let s = spec("worker", RestartPolicy::Always, |w| {
        w.liveness_probe = Some(probe("exec: {command: [cat, /tmp/alive]}\nperiodSeconds: 2"))
    });
    let _object = t.start(&s);
    let reason = format!("livenessProbe failed 3 times: {out}");
    let seen = t.until(|r| matches!(r, R::Event(EventKind::Restarted, _))).await;
    assert_eq!(
        seen,
        [
            starting(),
            R::Readiness(None),
            running(),
            R::Event(EventKind::Unhealthy, reason.clone()),
            R::State(StateKind::Failed(Failed::ExecFailed), reason),
            R::Event(EventKind::Restarted, "restartPolicy Always after Failed(ExecFailed)".into()),
        ]
    );
    assert_eq!(t.until(|r| *r == running()).await.last(), Some(&running()));
    assert_eq!(t.fake.created().len(), 2, "created anew");
    assert_eq!(t.fake.deleted().len(), 1, "the unhealthy container was removed");
    assert_eq!(t.fake.containers().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_liveness_failure_under_never_removes_the_container_and_it_stays_failed() {
    let mut t = Probed::new();
    t.fake.probes().answer("tcp:5432", Answer::Fail("tcp 127.0.0.1:5432: Connection refused".into()));
    let s = spec("db", RestartPolicy::Never, |w| {
        w.liveness_probe = Some(probe("tcpSocket: {port: 5432}\nfailureThreshold: 1"))
    });
    let _object = t.start(&s);
    let seen = t.until(|r| matches!(r, R::State(StateKind::Failed(_), _))).await;
    assert_eq!(
        seen[3],
        R::Event(EventKind::Unhealthy, "livenessProbe failed once: tcp 127.0.0.1:5432: Connection refused".into())
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(t.reports.try_recv().is_err(), "nothing more: no restart, no more probes");
    assert_eq!((t.fake.created().len(), t.fake.containers().len()), (1, 0));
    assert_eq!(t.fake.probes().tries_of("tcp:5432").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_change_of_only_the_probes_keeps_the_container_and_probes_with_the_new_settings() {
    let mut t = Probed::new();
    let s = spec("web", RestartPolicy::Never, |w| w.readiness_probe = Some(probe("httpGet: {port: 8080}")));
    let mut object = t.start(&s);
    t.until(|r| *r == R::Readiness(Some(Readiness::Ready))).await;
    let changed = spec("web", RestartPolicy::Never, |w| w.readiness_probe = Some(probe("tcpSocket: {port: 9090}")));
    object.update(Some(changed));
    assert_eq!(
        t.until(|r| *r == R::Readiness(Some(Readiness::Ready))).await[0],
        R::Readiness(Some(Readiness::Unknown))
    );
    assert_eq!(t.fake.probes().tries_of("tcp:9090").len(), 1);
    let tries_8080 = t.fake.probes().tries_of("http:8080").len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(t.fake.probes().tries_of("http:8080").len(), tries_8080, "the old probe stopped");
    // Dropping the probes altogether gives the Available condition back to the state.
    object.update(Some(spec("web", RestartPolicy::Never, |_| {})));
    assert_eq!(t.until(|r| matches!(r, R::Readiness(None))).await.last(), Some(&R::Readiness(None)));
    assert_eq!(t.fake.created().len(), 1, "never recreated");
}

#[tokio::test(start_paused = true)]
async fn a_workload_without_probes_reports_what_it_always_did() {
    let mut t = Probed::new();
    let _object = t.start(&spec("plain", RestartPolicy::Never, |_| {}));
    assert_eq!(t.until(|r| *r == running()).await, [starting(), running()]);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(t.reports.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn the_probes_stop_when_the_workload_is_deleted_or_exits() {
    let mut t = Probed::new();
    let live = |w: &mut Workload| w.liveness_probe = Some(probe("tcpSocket: {port: 1}\nperiodSeconds: 1"));
    let mut deleted = t.start(&spec("gone", RestartPolicy::Never, live));
    let exits = t.start(&spec("ends", RestartPolicy::Never, live));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(t.fake.probes().tries_of("tcp:1").len(), 6, "two containers, three tries each");
    deleted.delete();
    // The state watcher sees `ends` exit (this harness has no watcher: told directly).
    let ends = spec("ends", RestartPolicy::Never, live).instance_name;
    let id = t.fake.workload_id_of(&ends).expect("the container of ends");
    let exited = crate::runtime_connectors::podman::events::exit_state(1);
    exits.sender().observed(ends, id, crate::runtime_connectors::Observed::State(exited));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let tries = t.fake.probes().tries_of("tcp:1").len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(t.fake.probes().tries_of("tcp:1").len(), tries, "no tries after the delete and the exit");
    let seen: Vec<R> = std::iter::from_fn(|| t.reports.try_recv().ok())
        .filter_map(|r| match r {
            LoopReport::Event(e) => Some(R::Event(e.kind, e.reason)),
            _ => None,
        })
        .collect();
    assert!(!seen.iter().any(|r| matches!(r, R::Event(EventKind::Unhealthy, _))), "{seen:?}");
}
