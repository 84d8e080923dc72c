//! [`PsCache`]: the PodmanCli container state cache. One `podman ps --all`
//! of every container of the host serves all state getters that ask within
//! a second, instead of one podman call per workload and poll. A value
//! owned by its connector (no statics); `reset` forces a fresh listing, e.g.
//! right after a create.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::cli::{PodmanCli, PodmanError, PsEntry};

/// How long a listing is reused.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Lists all containers of the host (podman, or a fake in tests).
#[async_trait]
pub trait ContainerLister: Send + Sync {
    async fn list_all(&self) -> Result<Vec<PsEntry>, PodmanError>;
}

#[async_trait]
impl ContainerLister for PodmanCli {
    async fn list_all(&self) -> Result<Vec<PsEntry>, PodmanError> {
        self.ps_all().await
    }
}

/// The cached listing.
pub struct PsCache {
    lister: Arc<dyn ContainerLister>,
    /// The last listing and when it was taken; a lock held across the
    /// refresh so that concurrent callers share one podman call.
    last: Mutex<Option<(Instant, Arc<Vec<PsEntry>>)>>,
}

impl PsCache {
    pub fn new(lister: Arc<dyn ContainerLister>) -> Self {
        Self { lister, last: Mutex::new(None) }
    }

    /// All containers, from a listing at most [`MAX_AGE`] old.
    // [impl->swdd~podmancli-uses-container-state-cache~1]
    // [impl->swdd~podmancli-container-state-cache-refresh~1]
    pub async fn containers(&self) -> Result<Arc<Vec<PsEntry>>, PodmanError> {
        let mut last = self.last.lock().await;
        if let Some((at, list)) = last.as_ref()
            && at.elapsed() < MAX_AGE
        {
            return Ok(list.clone());
        }
        let list = Arc::new(self.lister.list_all().await?);
        *last = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// Forgets the listing; the next call lists again.
    pub async fn reset(&self) {
        *self.last.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    struct Counting(AtomicUsize);

    #[async_trait]
    impl ContainerLister for Counting {
        async fn list_all(&self) -> Result<Vec<PsEntry>, PodmanError> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Ok(vec![PsEntry {
                id: format!("c{n}"),
                names: vec![],
                state: "running".into(),
                exit_code: 0,
                labels: None,
                pod: String::new(),
                is_infra: false,
            }])
        }
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~podmancli-container-state-cache-all-containers~1]
    // [utest->swdd~podmancli-uses-container-state-cache~1]
    // [utest->swdd~podmancli-container-state-cache-refresh~1]
    async fn ps_cache_lists_at_most_once_a_second_and_again_after_reset() {
        let lister = Arc::new(Counting::default());
        let cache = PsCache::new(lister.clone());
        assert_eq!(cache.containers().await.unwrap()[0].id, "c0");
        tokio::time::advance(Duration::from_millis(900)).await;
        assert_eq!(cache.containers().await.unwrap()[0].id, "c0");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert_eq!(cache.containers().await.unwrap()[0].id, "c1");
        cache.reset().await;
        assert_eq!(cache.containers().await.unwrap()[0].id, "c2");
        assert_eq!(lister.0.load(Ordering::SeqCst), 3);
    }
}
