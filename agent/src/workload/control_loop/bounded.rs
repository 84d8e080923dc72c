//! Bounded runtime operations: at most `--max-parallel-creates` creates and
//! as many deletes run at the same time, each kind with its own semaphore.
//!
//! Each `podman run` or `podman stop`/`rm` is a process of 30 to 60 MB. On a
//! node of half a core and 512 MiB (tools/bench/ecubench.py), an update of
//! 100 workloads started 100 deletes at once and the OOM killer ended them
//! with SIGKILL, leaving the workloads in `Stopping(DeleteFailed)`; the
//! reference's 100 unbounded creates failed the same way. An operation that
//! runs longer than `slow` (pulling an image, waiting out a stop's grace
//! period) waits on something other than the node and gives its slot back.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Semaphore;

/// Runs `op` holding a permit of `permits` for at most `slow`. A closed
/// semaphore (at shutdown) runs it unbounded.
pub(crate) async fn run<F: Future>(permits: &Semaphore, slow: Duration, what: &str, op: F) -> F::Output {
    let permit = permits.acquire().await.ok();
    tokio::pin!(op);
    tokio::select! {
        result = &mut op => result,
        () = tokio::time::sleep(slow) => {
            drop(permit);
            tracing::debug!("{what} slower than {slow:?}; others may start meanwhile");
            op.await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    async fn op(running: Arc<AtomicUsize>, peak: Arc<AtomicUsize>, lasts: Duration) {
        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(lasts).await;
        running.fetch_sub(1, Ordering::SeqCst);
    }

    async fn peak_of(n: usize, permits: usize, lasts: Duration) -> (usize, Duration) {
        let sem = Arc::new(Semaphore::new(permits));
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let start = tokio::time::Instant::now();
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let (sem, running, peak) = (sem.clone(), running.clone(), peak.clone());
                tokio::spawn(async move { run(&sem, Duration::from_secs(2), "op", op(running, peak, lasts)).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        (peak.load(Ordering::SeqCst), start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_the_permits_run_at_once() {
        let (peak, took) = peak_of(100, 2, Duration::from_millis(500)).await;
        assert_eq!(peak, 2);
        assert_eq!(took, Duration::from_millis(500) * 50);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_operation_gives_its_permit_back() {
        // Ten 10 s operations with 2 permits: each holds its permit for 2 s
        // only, so all have started after 10 s and end by 20 s.
        let (peak, took) = peak_of(10, 2, Duration::from_secs(10)).await;
        assert_eq!(peak, 10);
        assert_eq!(took, Duration::from_secs(18));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_semaphore_runs_unbounded() {
        let sem = Semaphore::new(1);
        sem.close();
        let out = run(&sem, Duration::from_secs(2), "op", async { 7 }).await;
        assert_eq!(out, 7);
    }
}
