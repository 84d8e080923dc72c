//! Gives the heap's free memory back to the system. glibc's allocator keeps
//! what a burst freed (100 creates, a large apply) as free heap pages that
//! still count in the daemon's RSS and PSS: after a burst of 100 creates the
//! agent stayed at 10.6 MB where an agent that resumed the same 100
//! workloads holds 7.6 MB. `malloc_trim(0)` every [`TRIM_EVERY`] returns
//! them; on a heap of a few MB it takes microseconds. Other C libraries
//! (musl) return freed pages themselves, and there it does nothing.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// How often the free heap is given back.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Trims the heap every [`TRIM_EVERY`] until `shutdown`.
pub fn spawn_trimmer(shutdown: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = every.tick() => trim(),
            }
        }
    })
}

/// Returns the heap's free pages to the system, where the allocator can.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free; it
    // takes no pointer and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_after_freeing_a_burst_keeps_the_heap_usable() {
        let burst: Vec<Vec<u8>> = (0..1000).map(|i| vec![i as u8; 4096]).collect();
        assert_eq!(burst.len(), 1000);
        drop(burst);
        trim();
        let again = vec![7u8; 1 << 20];
        assert_eq!(again[12345], 7);
    }

    #[tokio::test(start_paused = true)]
    async fn the_trimmer_ends_with_the_shutdown() {
        let stop = CancellationToken::new();
        let task = spawn_trimmer(stop.clone());
        tokio::time::sleep(TRIM_EVERY * 3).await;
        assert!(!task.is_finished());
        stop.cancel();
        task.await.unwrap();
    }
}
