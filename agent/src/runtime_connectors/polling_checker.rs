//! [`GenericPollingStateChecker`]: a state checker for runtimes without an
//! event stream. It asks a [`RuntimeStateGetter`] for one workload's state
//! every second and sends `RuntimeEvent::Changed` when the state changed. It
//! stops when its [`StateChecker`] handle is dropped, when the workload is
//! gone, or when nobody listens any more.

use std::sync::Arc;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{Observed, RuntimeEvent, RuntimeEventSender, StateChecker, WorkloadId};

/// How often the checker polls.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Gets the current state of a workload by its id.
// [impl->swdd~agent-general-runtime-state-getter-interface~1]
#[async_trait]
pub trait RuntimeStateGetter: Send + Sync + 'static {
    async fn get_state(&self, workload_id: &WorkloadId) -> Observed;
}

/// Polls a [`RuntimeStateGetter`] for one workload.
// [impl->swdd~agent-provides-generic-state-checker-implementation~1]
pub struct GenericPollingStateChecker;

impl GenericPollingStateChecker {
    /// Starts polling `workload_id` every `interval`; the first poll is immediate.
    pub fn start(
        getter: Arc<dyn RuntimeStateGetter>,
        instance_name: WorkloadInstanceName,
        workload_id: WorkloadId,
        sink: RuntimeEventSender,
        interval: Duration,
    ) -> StateChecker {
        let stop = CancellationToken::new();
        tokio::spawn(poll(getter, instance_name, workload_id, sink, interval, stop.clone()));
        StateChecker::new(stop)
    }
}

// [impl->swdd~generic-state-checker-sends-workload-state~2]
async fn poll(
    getter: Arc<dyn RuntimeStateGetter>,
    instance_name: WorkloadInstanceName,
    workload_id: WorkloadId,
    sink: RuntimeEventSender,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<Observed> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let observed = getter.get_state(&workload_id).await;
        if last.as_ref() == Some(&observed) {
            continue;
        }
        last = Some(observed.clone());
        let gone = observed == Observed::Gone;
        let ev =
            RuntimeEvent::Changed { instance_name: instance_name.clone(), workload_id: workload_id.clone(), observed };
        if sink.send(ev).await.is_err() || gone {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use ank_common::{AgentName, ExecutionState, WorkloadName};
    use tokio::sync::mpsc;

    use super::*;

    /// Returns scripted states and counts the polls.
    struct Scripted(Mutex<(Vec<Observed>, usize)>);

    #[async_trait]
    impl RuntimeStateGetter for Scripted {
        async fn get_state(&self, _: &WorkloadId) -> Observed {
            let mut g = self.0.lock().unwrap();
            g.1 += 1;
            let i = (g.1 - 1).min(g.0.len() - 1);
            g.0[i].clone()
        }
    }

    fn instance() -> WorkloadInstanceName {
        WorkloadInstanceName::new(&WorkloadName::new("k").unwrap(), &AgentName::new("a").unwrap(), "x")
    }

    fn running() -> Observed {
        Observed::State(ExecutionState::running())
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-provides-generic-state-checker-implementation~1]
    // [utest->swdd~generic-state-checker-sends-workload-state~2]
    // [utest->swdd~agent-general-runtime-state-getter-interface~1]
    async fn polling_checker_polls_every_second_and_sends_only_changes() {
        let failed = Observed::State(ExecutionState::failed("Exit code: '1'"));
        let getter = Arc::new(Scripted(Mutex::new((vec![running(), running(), running(), failed.clone()], 0))));
        let (tx, mut rx) = mpsc::channel(8);
        let start = tokio::time::Instant::now();
        let _checker =
            GenericPollingStateChecker::start(getter.clone(), instance(), WorkloadId("id".into()), tx, POLL_INTERVAL);
        let RuntimeEvent::Changed { observed, .. } = rx.recv().await.unwrap() else { panic!() };
        assert_eq!(observed, running());
        assert_eq!(start.elapsed(), Duration::ZERO);
        let RuntimeEvent::Changed { observed, .. } = rx.recv().await.unwrap() else { panic!() };
        assert_eq!(observed, failed);
        assert_eq!(start.elapsed(), Duration::from_secs(3), "the 4th poll, one per second");
        assert_eq!(getter.0.lock().unwrap().1, 4);
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-general-state-checker-interface~1]
    async fn polling_checker_stops_when_dropped_and_after_gone() {
        let getter = Arc::new(Scripted(Mutex::new((vec![running()], 0))));
        let (tx, mut rx) = mpsc::channel(8);
        let checker =
            GenericPollingStateChecker::start(getter.clone(), instance(), WorkloadId("id".into()), tx, POLL_INTERVAL);
        rx.recv().await.unwrap();
        drop(checker);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(getter.0.lock().unwrap().1 <= 2, "no polling after the handle is dropped");
        assert!(rx.recv().await.is_none(), "the checker ended and dropped its sender");

        let getter = Arc::new(Scripted(Mutex::new((vec![running(), Observed::Gone], 0))));
        let (tx, mut rx) = mpsc::channel(8);
        let _checker =
            GenericPollingStateChecker::start(getter.clone(), instance(), WorkloadId("id".into()), tx, POLL_INTERVAL);
        rx.recv().await.unwrap();
        let RuntimeEvent::Changed { observed, .. } = rx.recv().await.unwrap() else { panic!() };
        assert_eq!(observed, Observed::Gone);
        assert!(rx.recv().await.is_none(), "a removed workload is not polled any more");
    }
}
