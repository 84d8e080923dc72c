//! Listing this agent's existing workloads in all runtimes, and the listing
//! started once at the agent's start.
//!
//! The start listing begins as soon as the state watchers run, while the
//! server link connects and says hello, so that it is (nearly) done when
//! the server's first `ServerHello` comes: the hello and any work the
//! server sends right after it wait less for the agent's start-up podman
//! calls. The first hello uses it, waiting for it if it still runs,
//! instead of listing again, as long as no runtime event arrived since it
//! began (a runtime event means the listing may be out of date: the hello
//! then lists afresh) and it is recent. The state watchers were started
//! before it, so any later change reaches the resumed workloads as an
//! event. The agent still says hello at once: scripts (and Ankaios' system
//! tests) expect it in `ank get state` right after its start.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::runtime_facade::RuntimeFacade;
use crate::runtime_connectors::ListedWorkload;

/// Existing workloads by instance name, with the name of their runtime.
pub(super) type Existing = BTreeMap<WorkloadInstanceName, (String, ListedWorkload)>;

/// The start listing is not used by a hello that comes later than this
/// after it began (the server was not reachable at the start).
const MAX_AGE: Duration = Duration::from_secs(10);

/// Lists the workloads of `agent` in all `runtimes` at the same time: the
/// caller waits for the slowest listing, not for the sum of them. A runtime
/// whose listing fails is left out (with a warning). `at_start`: the
/// listing of the agent's start, which may take a listing the runtime made
/// since its state watcher started.
// [impl->swdd~agent-existing-workloads-finds-list~1]
pub(super) async fn list_existing(runtimes: Vec<RuntimeFacade>, agent: String, at_start: bool) -> Existing {
    let mut listings = tokio::task::JoinSet::new();
    for facade in runtimes {
        let agent = agent.clone();
        listings.spawn(async move {
            let listed = if at_start {
                facade.list_workloads_at_start(&agent).await
            } else {
                facade.list_reusable_workloads(&agent).await
            };
            (facade.name().to_owned(), listed)
        });
    }
    let mut existing = BTreeMap::new();
    while let Some(done) = listings.join_next().await {
        match done {
            Ok((runtime, Ok(list))) => {
                existing.extend(list.into_iter().map(|w| (w.instance_name.clone(), (runtime.clone(), w))))
            }
            Ok((runtime, Err(e))) => tracing::warn!("listing workloads of runtime '{runtime}' failed: {e}"),
            Err(e) => tracing::warn!("listing workloads of a runtime failed: {e}"),
        }
    }
    existing
}

/// The listing taken at the agent's start, running or done.
pub(super) struct StartListing {
    task: JoinHandle<Existing>,
    began: Instant,
}

impl StartListing {
    /// Starts listing `runtimes` in the background.
    pub fn start(runtimes: Vec<RuntimeFacade>, agent: String) -> Self {
        let began = Instant::now();
        let task = tokio::spawn(async move {
            let existing = list_existing(runtimes, agent, true).await;
            tracing::debug!(
                "{} existing workloads listed at the agent's start, in {:.1} ms",
                existing.len(),
                began.elapsed().as_secs_f64() * 1e3
            );
            existing
        });
        Self { task, began }
    }

    /// The listing, waited for if it still runs; `None` when it is too old
    /// to be used or failed.
    pub async fn take(self) -> Option<Existing> {
        if self.began.elapsed() > MAX_AGE {
            tracing::debug!("the listing of the agent's start is too old for this hello; listing again");
            self.task.abort();
            return None;
        }
        self.task.await.ok()
    }

    /// Drops the listing because something changed since it began.
    pub fn discard(self) {
        tracing::debug!("a runtime event arrived after the listing of the agent's start; the hello lists again");
        self.task.abort();
    }
}
