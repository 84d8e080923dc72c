//! The runner's timing and thresholds under paused time, with the scripted
//! [`FakeProbes`]: initial delay and period, consecutive failures, the
//! startup probe's gate, the timeout of a try, and readiness flips
//! reported once per flip.

use std::sync::Arc;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use ank_common::health_spec::Probe;
use ank_common::workload_events::EventKind;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::probe_runner::{ProbeRunner, Runner};
use crate::probes::fake::{Answer, FakeProbes};
use crate::probes::self_report::SelfReports;
use crate::probes::{ProbeSet, ProbeTarget, Readiness};
use crate::runtime_connectors::WorkloadId;
use crate::workload::{LoopReport, StateReporter, WorkloadCommand, WorkloadCommandSender};

fn probe(yaml: &str) -> Probe {
    serde_saphyr::from_str(yaml).unwrap()
}

struct Harness {
    fake: Arc<FakeProbes>,
    reports: mpsc::Receiver<LoopReport>,
    commands: mpsc::UnboundedReceiver<WorkloadCommand>,
    self_reports: SelfReports,
    started: Instant,
    _runner: ProbeRunner,
}

/// What the runner said, in order, with the seconds since its start.
#[derive(Debug, PartialEq, Eq)]
enum Said {
    Readiness(u64, Readiness),
    Unhealthy(u64, String),
    LivenessFailed(u64, String),
}

impl Harness {
    fn start(probes: ProbeSet) -> Self {
        let fake = Arc::new(FakeProbes::default());
        Self::with(probes, fake)
    }

    fn with(probes: ProbeSet, fake: Arc<FakeProbes>) -> Self {
        Self::with_executor(probes, fake.clone(), Some(fake))
    }

    fn with_executor(probes: ProbeSet, fake: Arc<FakeProbes>, executor: Option<Arc<FakeProbes>>) -> Self {
        let (reporter, reports) = StateReporter::channel(64);
        let (control_loop, commands) = WorkloadCommandSender::channel();
        let self_reports = SelfReports::default();
        let runner = Runner {
            instance: WorkloadInstanceName::parse("web.abc.agent_A").unwrap(),
            target: ProbeTarget::new(WorkloadId("c1".into())),
            probes,
            executor: executor.map(|e| e as Arc<dyn crate::probes::ProbeExecutor>),
            self_reports: self_reports.clone(),
            reporter,
            control_loop,
        };
        Self { fake, reports, commands, self_reports, started: Instant::now(), _runner: ProbeRunner::start(runner) }
    }

    fn secs(&self, at: Instant) -> u64 {
        (at - self.started).as_secs()
    }

    /// The next thing the runner says (within 10 virtual minutes).
    async fn next(&mut self) -> Said {
        let said = tokio::time::timeout(Duration::from_secs(600), async {
            tokio::select! {
                Some(r) = self.reports.recv() => match r {
                    LoopReport::Readiness(_, Some(r)) => Said::Readiness(0, r),
                    LoopReport::Event(e) if e.kind == EventKind::Unhealthy => Said::Unhealthy(0, e.reason),
                    other => panic!("unexpected report {other:?}"),
                },
                Some(c) = self.commands.recv() => match c {
                    WorkloadCommand::LivenessFailed { reason, .. } => Said::LivenessFailed(0, reason),
                    other => panic!("unexpected command {other:?}"),
                },
            }
        })
        .await
        .expect("the runner said nothing within 600 s");
        let at = self.secs(Instant::now());
        match said {
            Said::Readiness(_, r) => Said::Readiness(at, r),
            Said::Unhealthy(_, r) => Said::Unhealthy(at, r),
            Said::LivenessFailed(_, r) => Said::LivenessFailed(at, r),
        }
    }

    fn tries(&self, key: &str) -> Vec<u64> {
        self.fake.tries_of(key).into_iter().map(|at| self.secs(at)).collect()
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_try_waits_the_initial_delay_then_one_per_period() {
    let readiness = probe("httpGet: {port: 8080}\ninitialDelaySeconds: 5\nperiodSeconds: 2");
    let mut h = Harness::start(ProbeSet { readiness: Some(readiness), ..Default::default() });
    assert_eq!(h.next().await, Said::Readiness(5, Readiness::Ready));
    tokio::time::sleep(Duration::from_millis(6500)).await;
    assert_eq!(h.tries("http:8080"), [5, 7, 9, 11]);
}

#[tokio::test(start_paused = true)]
async fn liveness_fails_after_failure_threshold_consecutive_failures_only() {
    let liveness = probe("exec: {command: [cat, /tmp/alive]}\nperiodSeconds: 3\nfailureThreshold: 3");
    let fake = Arc::new(FakeProbes::default());
    fake.answer("exec:cat /tmp/alive", Answer::Fail("exec [cat /tmp/alive] exit 1: no such file".into()));
    let mut h = Harness::with(ProbeSet { liveness: Some(liveness), ..Default::default() }, fake);
    // Two failures, then a pass: the count starts over.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    h.fake.answer("exec:cat /tmp/alive", Answer::Pass);
    tokio::time::sleep(Duration::from_secs(3)).await;
    h.fake.answer("exec:cat /tmp/alive", Answer::Fail("exec [cat /tmp/alive] exit 1: no such file".into()));
    assert_eq!(
        h.next().await,
        Said::LivenessFailed(15, "livenessProbe failed 3 times: exec [cat /tmp/alive] exit 1: no such file".into())
    );
    assert_eq!(h.tries("exec:cat /tmp/alive"), [0, 3, 6, 9, 12, 15]);
    // The runner ended with it: no further tries.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(h.tries("exec:cat /tmp/alive").len(), 6);
}

#[tokio::test(start_paused = true)]
async fn the_startup_probe_holds_off_liveness_and_readiness_until_it_passed() {
    let fake = Arc::new(FakeProbes::default());
    fake.answer("tcp:5432", Answer::Fail("tcp 127.0.0.1:5432: connection refused".into()));
    let probes = ProbeSet {
        startup: Some(probe("tcpSocket: {port: 5432}\nperiodSeconds: 1\nfailureThreshold: 30")),
        liveness: Some(probe("exec: {command: [true]}\nperiodSeconds: 10")),
        readiness: Some(probe("httpGet: {port: 80}\nperiodSeconds: 10")),
    };
    let mut h = Harness::with(probes, fake);
    tokio::time::sleep(Duration::from_millis(4500)).await;
    assert!(h.tries("exec:true").is_empty() && h.tries("http:80").is_empty(), "gated while starting");
    h.fake.answer("tcp:5432", Answer::Pass);
    assert_eq!(h.next().await, Said::Readiness(5, Readiness::Ready));
    assert_eq!(h.tries("tcp:5432"), [0, 1, 2, 3, 4, 5], "no startup tries after it passed once");
    tokio::time::sleep(Duration::from_millis(20500)).await;
    assert_eq!(h.tries("tcp:5432").len(), 6);
    assert_eq!(h.tries("exec:true"), [5, 15, 25]);
}

#[tokio::test(start_paused = true)]
async fn a_startup_probe_that_never_passes_is_a_liveness_failure() {
    let fake = Arc::new(FakeProbes::default());
    fake.answer("tcp:5432", Answer::Fail("tcp 127.0.0.1:5432: connection refused".into()));
    let probes = ProbeSet {
        startup: Some(probe("tcpSocket: {port: 5432}\nperiodSeconds: 2\nfailureThreshold: 4")),
        readiness: Some(probe("httpGet: {port: 80}")),
        ..Default::default()
    };
    let mut h = Harness::with(probes, fake);
    assert_eq!(
        h.next().await,
        Said::LivenessFailed(6, "startupProbe failed 4 times: tcp 127.0.0.1:5432: connection refused".into())
    );
    assert!(h.tries("http:80").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_try_that_hangs_is_cut_off_by_the_timeout_and_fails() {
    let fake = Arc::new(FakeProbes::default());
    fake.answer("http:8080", Answer::Hang);
    let readiness = probe("httpGet: {port: 8080}\ntimeoutSeconds: 2\nperiodSeconds: 5\nfailureThreshold: 2");
    let mut h = Harness::with(ProbeSet { readiness: Some(readiness), ..Default::default() }, fake);
    // Tries at 0 and 5, each cut off 2 s later.
    assert_eq!(h.next().await, Said::Unhealthy(7, "readinessProbe failed 2 times: timed out after 2s".into()));
    assert_eq!(h.next().await, Said::Readiness(7, Readiness::NotReady("timed out after 2s".into())));
}

#[tokio::test(start_paused = true)]
async fn readiness_flips_are_reported_once_each_with_one_event_per_failure_flip() {
    let fake = Arc::new(FakeProbes::default());
    let readiness = probe("httpGet: {port: 80}\nperiodSeconds: 1\nsuccessThreshold: 2\nfailureThreshold: 2");
    let mut h = Harness::with(ProbeSet { readiness: Some(readiness), ..Default::default() }, fake);
    assert_eq!(h.next().await, Said::Readiness(1, Readiness::Ready), "after two passes");
    h.fake.answer("http:80", Answer::Fail("HTTP GET 127.0.0.1:80/: HTTP/1.1 500 Internal Server Error".into()));
    assert_eq!(
        h.next().await,
        Said::Unhealthy(
            3,
            "readinessProbe failed 2 times: HTTP GET 127.0.0.1:80/: HTTP/1.1 500 Internal Server Error".into()
        )
    );
    assert!(matches!(h.next().await, Said::Readiness(3, Readiness::NotReady(m)) if m.contains("500")));
    // It keeps failing: nothing more is said.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(h.reports.try_recv().is_err());
    h.fake.answer("http:80", Answer::Pass);
    assert_eq!(h.next().await, Said::Readiness(14, Readiness::Ready));
}

#[tokio::test(start_paused = true)]
async fn a_self_report_probe_takes_the_latest_report_within_its_period() {
    let readiness = probe("selfReport: {}\nperiodSeconds: 5\nfailureThreshold: 1");
    let mut h = Harness::start(ProbeSet { readiness: Some(readiness), ..Default::default() });
    assert_eq!(h.next().await, Said::Unhealthy(0, "readinessProbe failed once: no health report for 5s".into()));
    assert_eq!(h.next().await, Said::Readiness(0, Readiness::NotReady("no health report for 5s".into())));
    h.self_reports.record("web", true, "warmed up").unwrap();
    assert_eq!(h.next().await, Said::Readiness(5, Readiness::Ready));
    // The report of 0 s no longer counts at 10 s: a failure again.
    assert!(matches!(h.next().await, Said::Unhealthy(10, r) if r.ends_with("no health report for 5s")));
}

#[tokio::test(start_paused = true)]
async fn probes_a_runtime_cannot_run_never_restart_the_workload_and_readiness_fails() {
    let probes = ProbeSet {
        startup: Some(probe("tcpSocket: {port: 5432}\nfailureThreshold: 1")),
        liveness: Some(probe("exec: {command: [true]}\nfailureThreshold: 1\nperiodSeconds: 1")),
        readiness: Some(probe("httpGet: {port: 80}\nfailureThreshold: 1")),
    };
    let mut h = Harness::with_executor(probes, Arc::default(), None);
    let cannot = "the runtime of this workload cannot run this probe";
    assert_eq!(h.next().await, Said::Unhealthy(0, format!("readinessProbe failed once: {cannot}")));
    assert_eq!(h.next().await, Said::Readiness(0, Readiness::NotReady(cannot.into())));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(h.commands.try_recv().is_err(), "no liveness failure");
    assert!(h.reports.try_recv().is_err(), "the readiness stays as it is");
}
