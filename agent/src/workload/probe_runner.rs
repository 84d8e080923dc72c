//! [`ProbeRunner`]: the task that probes one running container. After
//! each probe's `initialDelaySeconds` (counted from the start of the
//! runner, which starts when the container is observed Running) it tries
//! the probe every `periodSeconds`, each try cut off after
//! `timeoutSeconds`, and counts consecutive results ([`Thresholds`]):
//!
//! - the startup probe runs first and holds off the other two until it
//!   passed once; `failureThreshold` failures of it are a liveness failure;
//! - liveness: `failureThreshold` failures in a row are reported to the
//!   control loop (`WorkloadCommand::LivenessFailed`), which restarts the
//!   container under its restart policy; the runner ends there;
//! - readiness: each flip of the verdict is reported to the
//!   `RuntimeManager` (it becomes the Available condition), a flip to
//!   failing also as an Unhealthy event.
//!
//! Dropping the handle stops the task (the loop drops it when the
//! container is no longer running, is replaced or deleted).

use std::sync::Arc;

use ank_common::WorkloadInstanceName;
use ank_common::health_spec::{Probe, ProbeKind};
use ank_common::workload_events::EventKind;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{StateReporter, WorkloadCommandSender};
use crate::probes::self_report::SelfReports;
use crate::probes::thresholds::{Thresholds, Verdict};
use crate::probes::{ProbeAction, ProbeExecutor, ProbeOutcome, ProbeSet, ProbeTarget, Readiness};

/// What a runner works with.
pub(crate) struct Runner {
    pub instance: WorkloadInstanceName,
    pub target: ProbeTarget,
    pub probes: ProbeSet,
    /// The runtime's executor; `None` when the runtime cannot run probes
    /// (then every try of an exec/httpGet/tcpSocket probe fails).
    pub executor: Option<Arc<dyn ProbeExecutor>>,
    pub self_reports: SelfReports,
    pub reporter: StateReporter,
    /// The workload's own control loop, told of a liveness failure.
    pub control_loop: WorkloadCommandSender,
}

/// The running task; dropping it stops the probes.
#[derive(Debug)]
pub(crate) struct ProbeRunner {
    task: JoinHandle<()>,
}

impl ProbeRunner {
    pub(crate) fn start(runner: Runner) -> Self {
        Self { task: tokio::spawn(runner.run()) }
    }
}

impl Drop for ProbeRunner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The handler of a probe, unless it is `selfReport`.
fn action(p: &Probe) -> Option<ProbeAction> {
    if let Some(e) = &p.exec {
        return Some(ProbeAction::Exec(e.clone()));
    }
    if let Some(h) = &p.http_get {
        return Some(ProbeAction::HttpGet(h.clone()));
    }
    p.tcp_socket.as_ref().map(|t| ProbeAction::TcpSocket(t.clone()))
}

impl Runner {
    async fn run(self) {
        let started = Instant::now();
        // A probe the runtime cannot run never restarts the workload: the
        // startup gate opens and the liveness probe is left out (logged);
        // a readiness probe fails (the workload is not known to be ready).
        let startup = self.probes.startup.as_ref().filter(|p| self.can_run(p, "startupProbe"));
        let liveness = self.probes.liveness.as_ref().filter(|p| self.can_run(p, "livenessProbe"));
        if let Some(p) = startup
            && let Err(reason) = self.until_passing(p, "startupProbe", started).await
        {
            return self.control_loop.liveness_failed(self.target.workload_id.clone(), reason.to_string());
        }
        let liveness = async {
            match liveness {
                Some(p) => self.until_failing(p, started).await,
                None => std::future::pending().await,
            }
        };
        let readiness = async {
            match &self.probes.readiness {
                Some(p) => self.follow_readiness(p, started).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            reason = liveness => self.control_loop.liveness_failed(self.target.workload_id.clone(), reason),
            () = readiness => {}
        }
    }

    /// Whether this runtime can run `p` (logs when not).
    fn can_run(&self, p: &Probe, name: &str) -> bool {
        let can = self.executor.is_some() || p.kind() == Ok(ProbeKind::SelfReport);
        if !can {
            tracing::warn!("workload '{}': its runtime cannot run its {name}; it is left out", self.instance);
        }
        can
    }

    /// One try of `p`, cut off after its timeout.
    async fn try_once(&self, p: &Probe) -> ProbeOutcome {
        let timeout = p.timeout();
        if p.kind() == Ok(ProbeKind::SelfReport) {
            return self.self_reports.outcome(&self.instance.workload_name, p.period());
        }
        let (Some(action), Some(executor)) = (action(p), &self.executor) else {
            return ProbeOutcome::fail("the runtime of this workload cannot run this probe");
        };
        match tokio::time::timeout(timeout, executor.probe(&self.target, &action, timeout)).await {
            Ok(outcome) => outcome,
            Err(_) => ProbeOutcome::fail(format!("timed out after {}s", timeout.as_secs())),
        }
    }

    /// The tries of `p` on its schedule.
    fn tries<'a>(&'a self, p: &'a Probe, started: Instant) -> Tries<'a> {
        Tries { runner: self, probe: p, next: (started + p.initial_delay()).max(Instant::now()) }
    }

    /// Runs a startup probe until it passed once (`Ok`) or failed
    /// `failureThreshold` times in a row (`Err` with the reason).
    async fn until_passing(&self, p: &Probe, name: &'static str, started: Instant) -> Result<(), ProbeFailed> {
        let mut t = Thresholds::new(1, p.failure_threshold());
        let mut tries = self.tries(p, started);
        loop {
            let outcome = tries.next().await;
            match t.record(outcome.passed) {
                Some(Verdict::Passing) => return Ok(()),
                Some(Verdict::Failing) => {
                    return Err(ProbeFailed { probe: name, times: t.failures(), output: outcome.output });
                }
                _ => {}
            }
        }
    }

    /// Runs a liveness probe until it failed `failureThreshold` times in a
    /// row; returns the reason.
    async fn until_failing(&self, p: &Probe, started: Instant) -> String {
        let mut t = thresholds(p);
        let mut tries = self.tries(p, started);
        loop {
            let outcome = tries.next().await;
            if t.record(outcome.passed) == Some(Verdict::Failing) {
                return failed("livenessProbe", t.failures(), &outcome);
            }
        }
    }

    /// Runs a readiness probe for as long as the runner lives, reporting
    /// each flip of its verdict.
    async fn follow_readiness(&self, p: &Probe, started: Instant) {
        let mut t = thresholds(p);
        let mut tries = self.tries(p, started);
        loop {
            let outcome = tries.next().await;
            match t.record(outcome.passed) {
                Some(Verdict::Passing) => self.reporter.readiness(&self.instance, Some(Readiness::Ready)).await,
                Some(Verdict::Failing) => {
                    let reason = failed("readinessProbe", t.failures(), &outcome);
                    self.reporter.event(&self.instance, EventKind::Unhealthy, reason).await;
                    self.reporter.readiness(&self.instance, Some(Readiness::NotReady(outcome.output))).await;
                }
                _ => {}
            }
        }
    }
}

/// The schedule of one probe: the first try after its initial delay, then
/// one every period (from the start of one try to the next).
struct Tries<'a> {
    runner: &'a Runner,
    probe: &'a Probe,
    next: Instant,
}

impl Tries<'_> {
    async fn next(&mut self) -> ProbeOutcome {
        tokio::time::sleep_until(self.next).await;
        let outcome = self.runner.try_once(self.probe).await;
        tracing::trace!("workload '{}': probe try: {outcome:?}", self.runner.instance);
        self.next = (self.next + self.probe.period()).max(Instant::now());
        outcome
    }
}

fn thresholds(p: &Probe) -> Thresholds {
    Thresholds::new(p.success_threshold(), p.failure_threshold())
}

/// A probe that failed `times` times in a row, with its last output:
/// `livenessProbe failed 3 times: HTTP 500 ...`.
#[derive(Debug, thiserror::Error)]
#[error("{probe} failed {}: {output}", times_text(*.times))]
struct ProbeFailed {
    probe: &'static str,
    times: u32,
    output: String,
}

fn times_text(times: u32) -> String {
    if times == 1 { "once".to_owned() } else { format!("{times} times") }
}

/// `livenessProbe failed 3 times: HTTP 500 ...`.
fn failed(name: &'static str, times: u32, outcome: &ProbeOutcome) -> String {
    ProbeFailed { probe: name, times, output: outcome.output.clone() }.to_string()
}
