//! [`GhostWatch`]: the podman connector's watch on the processes of its
//! running containers (see [`process_watch`]). A container podman lists as
//! running whose main process and conmon are dead ("ghost") is reported
//! `Failed(ExecFailed)` as soon as the last of them ends, and is marked
//! failed in every later listing (podman keeps listing it as running):
//! the reconcile, the listing of the agent's start (so it is replaced, not
//! resumed) and the hello's. An ordinary exit is left to conmon's exit
//! file and podman's event, which report it as before.
//!
//! In: the ids of containers seen starting (events) or running (listings),
//! and of removed ones. Out: `RuntimeEvent::ChangedById` for a ghost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use ank_common::execution_state::Failed;
use ank_common::{ExecutionState, StateKind};
use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cli::PodmanCli;
use crate::runtime_connectors::process_watch::guard::{self, GhostExit, Opened, Processes, Target};
use crate::runtime_connectors::{ListedWorkload, Observed, RuntimeEvent, RuntimeEventSender, WorkloadId};

/// The state of a ghost: failed as an ordinary podman exit is (same kind,
/// the same `Exit code: 'N'` first when the code is known), saying why.
// [impl->swdd~podman-state-getter-maps-state~3]
pub fn ghost_state(exit: GhostExit) -> ExecutionState {
    let info = match exit.code {
        Some(code) => {
            format!("Exit code: '{code}' (conmon, the container's monitor, had died: podman did not record the exit)")
        }
        None => "process gone and conmon, the container's monitor, dead: podman did not record the exit".to_owned(),
    };
    ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), info)
}

/// The pids of running containers (podman inspect, or a fake in tests).
#[async_trait]
pub trait PidLookup: Send + Sync {
    /// The processes of those of `ids` that can be inspected.
    async fn targets(&self, ids: &[WorkloadId]) -> Vec<Target>;
}

/// `podman container inspect` format of one container's line.
const INSPECT_FORMAT: &str = "{{.Id}} {{.State.Status}} {{.State.Pid}} {{.State.ConmonPid}} {{.ConmonPidFile}}";

#[async_trait]
impl PidLookup for PodmanCli {
    async fn targets(&self, ids: &[WorkloadId]) -> Vec<Target> {
        // podman's own pid files first (see `pid_files`); an inspect for the rest.
        let mut found: Vec<Target> = Vec::new();
        let mut rest: Vec<WorkloadId> = Vec::new();
        for id in ids {
            match self.pid_files.read(&id.0) {
                Some((pid, monitor_pid)) => found.push(Target { container_id: id.0.clone(), pid, monitor_pid }),
                None => rest.push(id.clone()),
            }
        }
        if rest.is_empty() {
            return found;
        }
        let inspect = |ids: &[WorkloadId]| {
            let mut args: Vec<String> = ["container", "inspect", "--format", INSPECT_FORMAT].map(str::to_owned).into();
            args.extend(ids.iter().map(|i| i.0.clone()));
            args
        };
        let learn = |out: &str| {
            for line in out.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if let [id, _, _, _, pid_file] = f[..] {
                    self.pid_files.learn(id, pid_file);
                }
            }
            parse_targets(out)
        };
        match self.exec(&inspect(&rest)).await {
            Ok(out) => found.extend(learn(&out)),
            // One of them is gone (podman then fails the whole call): each alone.
            Err(_) if rest.len() > 1 => {
                for id in &rest {
                    if let Ok(out) = self.exec(&inspect(std::slice::from_ref(id))).await {
                        found.extend(learn(&out));
                    }
                }
            }
            Err(e) => {
                tracing::debug!("cannot inspect container '{}' for its pids: {e}", rest[0]);
            }
        }
        found
    }
}

/// The targets of `podman container inspect --format INSPECT_FORMAT` lines
/// of running containers (one that exited meanwhile has its exit
/// recorded); lines that do not read are skipped.
pub fn parse_targets(out: &str) -> Vec<Target> {
    out.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let container_id = f.next()?.to_owned();
            if f.next()? != "running" {
                return None;
            }
            let pid = f.next()?.parse().ok()?;
            let monitor_pid = f.next()?.parse().ok()?;
            Some(Target { container_id, pid, monitor_pid })
        })
        .collect()
}

/// What is known of the containers' processes.
#[derive(Default)]
struct Known {
    /// Containers whose processes are watched, with the watch's stop and
    /// when it began.
    watching: HashMap<WorkloadId, (CancellationToken, Instant)>,
    /// Containers found dead, with the state they were reported in.
    ghosts: HashMap<WorkloadId, ExecutionState>,
}

/// The watch on the processes of the connector's running containers.
pub struct GhostWatch {
    procs: Arc<dyn Processes>,
    pids: Arc<dyn PidLookup>,
    known: Mutex<Known>,
    /// Where ghosts are reported, and the agent's shutdown; set when the
    /// connector's state watcher starts.
    sink: OnceLock<(RuntimeEventSender, CancellationToken)>,
}

impl std::fmt::Debug for GhostWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let known = self.lock();
        f.debug_struct("GhostWatch")
            .field("watching", &known.watching.len())
            .field("ghosts", &known.ghosts.len())
            .finish()
    }
}

impl GhostWatch {
    pub fn new(procs: Arc<dyn Processes>, pids: Arc<dyn PidLookup>) -> Arc<Self> {
        Arc::new(Self { procs, pids, known: Mutex::new(Known::default()), sink: OnceLock::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Ghosts found from now on are sent to `sink`; watches end with `shutdown`.
    pub fn attach(&self, sink: RuntimeEventSender, shutdown: CancellationToken) {
        let _ = self.sink.set((sink, shutdown));
    }

    /// How many containers' processes are watched (for the docs' figures
    /// and tests).
    pub fn watched(&self) -> usize {
        self.lock().watching.len()
    }

    /// `listed` (a listing taken at `taken_at`) as the agent is to see it:
    /// a running container found dead is failed. Starts watching running
    /// containers not watched yet, and forgets containers no longer listed
    /// whose watch began before the listing was taken (`None`: the listing
    /// may be older than any watch, none is forgotten).
    // [impl->swdd~agent-existing-workloads-finds-list~1]
    pub async fn checked(
        self: &Arc<Self>,
        mut listed: Vec<ListedWorkload>,
        taken_at: Option<Instant>,
    ) -> Vec<ListedWorkload> {
        let new: Vec<WorkloadId> = {
            let mut known = self.lock();
            let ids: HashSet<&WorkloadId> = listed.iter().map(|w| &w.workload_id).collect();
            known.watching.retain(|id, (stop, since)| {
                let keep = ids.contains(id) || taken_at.is_none_or(|t| *since >= t);
                if !keep {
                    stop.cancel();
                }
                keep
            });
            if taken_at.is_some() {
                known.ghosts.retain(|id, _| ids.contains(id));
            }
            listed
                .iter()
                .filter(|w| w.state.kind == StateKind::Running)
                .map(|w| &w.workload_id)
                .filter(|id| !known.watching.contains_key(*id) && !known.ghosts.contains_key(*id))
                .cloned()
                .collect()
        };
        if !new.is_empty() {
            for target in self.pids.targets(&new).await {
                self.watch(target).await;
            }
        }
        let known = self.lock();
        for w in listed.iter_mut().filter(|w| w.state.kind == StateKind::Running) {
            if let Some(ghost) = known.ghosts.get(&w.workload_id) {
                w.state = ghost.clone();
            }
        }
        listed
    }

    /// Container `id` (re)started: its (new) processes are watched.
    pub fn started(self: &Arc<Self>, id: WorkloadId) {
        self.forget(&id);
        let me = self.clone();
        tokio::spawn(async move {
            for target in me.pids.targets(std::slice::from_ref(&id)).await {
                if let Some(state) = me.watch(target).await {
                    me.send(id.clone(), state).await;
                }
            }
        });
    }

    /// Container `id` is gone: nothing of it is watched or remembered.
    pub fn forget(&self, id: &WorkloadId) {
        let mut known = self.lock();
        if let Some((stop, _)) = known.watching.remove(id) {
            stop.cancel();
        }
        known.ghosts.remove(id);
    }

    /// Opens the processes of `target` (a running container); returns the
    /// ghost state when both are gone already, else watches them.
    async fn watch(self: &Arc<Self>, target: Target) -> Option<ExecutionState> {
        let id = WorkloadId(target.container_id.clone());
        let opened = guard::open(&*self.procs, &target);
        match opened {
            Opened::Recorded => None,
            Opened::Unwatchable(e) => {
                // Not looked up again at every listing: remembered as watched, with no watch.
                tracing::warn!("container '{id}' is not watched for a dead process: {e}");
                self.lock().watching.insert(id, (CancellationToken::new(), Instant::now()));
                None
            }
            Opened::Ghost(exit) => self.confirmed(&id, exit).await,
            Opened::Watching(guard) => {
                let stop = match self.sink.get() {
                    Some((_, shutdown)) => shutdown.child_token(),
                    None => CancellationToken::new(),
                };
                if let Some((old, _)) = self.lock().watching.insert(id.clone(), (stop.clone(), Instant::now())) {
                    old.cancel();
                }
                let me = self.clone();
                tokio::spawn(async move {
                    let ended = tokio::select! {
                        () = stop.cancelled() => return,
                        ended = guard.ended(&*me.procs) => ended,
                    };
                    me.lock().watching.remove(&id);
                    if let Some(exit) = ended
                        && let Some(state) = me.confirmed(&id, exit).await
                    {
                        me.send(id, state).await;
                    }
                });
                None
            }
        }
    }

    /// The ghost state of `id`, remembered, unless podman no longer has it
    /// running (asked only when the verdict is not certain: podman
    /// recorded the exit and removed conmon's exit file meanwhile).
    async fn confirmed(&self, id: &WorkloadId, exit: GhostExit) -> Option<ExecutionState> {
        if !exit.certain && self.pids.targets(std::slice::from_ref(id)).await.is_empty() {
            return None;
        }
        Some(self.mark_ghost(id, exit))
    }

    fn mark_ghost(&self, id: &WorkloadId, exit: GhostExit) -> ExecutionState {
        let state = ghost_state(exit);
        tracing::warn!("container '{id}' is dead though podman lists it as running: {}", state.additional_info);
        self.lock().ghosts.insert(id.clone(), state.clone());
        state
    }

    async fn send(&self, workload_id: WorkloadId, state: ExecutionState) {
        if let Some((sink, _)) = self.sink.get() {
            let _ = sink.send(RuntimeEvent::ChangedById { workload_id, observed: Observed::State(state) }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use ank_common::WorkloadInstanceName;
    use tokio::sync::mpsc;

    use super::*;
    use crate::runtime_connectors::process_watch::guard::fake::FakeProcesses;

    /// Pids from a table; counts the lookups.
    #[derive(Default)]
    struct FakePids {
        table: Mutex<HashMap<String, (i32, i32)>>,
        calls: AtomicUsize,
    }

    #[async_trait]
    impl PidLookup for FakePids {
        async fn targets(&self, ids: &[WorkloadId]) -> Vec<Target> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let table = self.table.lock().unwrap();
            ids.iter()
                .filter_map(|id| {
                    let (pid, monitor_pid) = *table.get(&id.0)?;
                    Some(Target { container_id: id.0.clone(), pid, monitor_pid })
                })
                .collect()
        }
    }

    fn listed(id: &str, state: ExecutionState) -> ListedWorkload {
        ListedWorkload {
            instance_name: WorkloadInstanceName::parse(&format!("w{id}.abc.agent_A")).unwrap(),
            workload_id: WorkloadId(id.into()),
            state,
        }
    }

    struct Setup {
        procs: FakeProcesses,
        pids: Arc<FakePids>,
        watch: Arc<GhostWatch>,
        rx: mpsc::Receiver<RuntimeEvent>,
        _stop: CancellationToken,
    }

    /// Containers `c1` (pids 10, 9) and `c2` (20, 19), all alive.
    fn setup() -> Setup {
        let procs = FakeProcesses::default();
        let pids = Arc::new(FakePids::default());
        for (id, main, monitor) in [("c1", 10, 9), ("c2", 20, 19)] {
            procs.spawn(main, id);
            procs.spawn(monitor, id);
            pids.table.lock().unwrap().insert(id.into(), (main, monitor));
        }
        let watch = GhostWatch::new(Arc::new(procs.clone()), pids.clone());
        let (tx, rx) = mpsc::channel(8);
        let stop = CancellationToken::new();
        watch.attach(tx, stop.clone());
        Setup { procs, pids, watch, rx, _stop: stop }
    }

    fn ghost_event(id: &str, code: Option<i32>) -> RuntimeEvent {
        RuntimeEvent::ChangedById {
            workload_id: WorkloadId(id.into()),
            observed: Observed::State(ghost_state(GhostExit { code, certain: true })),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_a_listed_container_whose_processes_die_unrecorded_is_reported_failed_and_listed_failed() {
        let mut s = setup();
        let running = vec![listed("c1", ExecutionState::running()), listed("c2", ExecutionState::running())];
        assert_eq!(s.watch.checked(running.clone(), Some(Instant::now())).await, running, "alive: as listed");
        assert_eq!(s.watch.watched(), 2);
        // The OOM killer takes c1's conmon and process: reported within the wake-up.
        s.procs.end(9, Some(137));
        s.procs.end(10, Some(137));
        let ev = tokio::time::timeout(Duration::from_millis(1), s.rx.recv()).await.unwrap().unwrap();
        assert_eq!(ev, ghost_event("c1", Some(137)));
        // podman still lists it running: the next listing says failed, without another lookup.
        let calls = s.pids.calls.load(Ordering::SeqCst);
        let again = s.watch.checked(running.clone(), Some(Instant::now())).await;
        assert_eq!(again[0].state, ghost_state(GhostExit { code: Some(137), certain: true }));
        assert_eq!(again[1], running[1]);
        assert_eq!(s.pids.calls.load(Ordering::SeqCst), calls, "known containers are not looked up again");
        assert_eq!(s.watch.watched(), 1);
        // Removed (no longer listed): forgotten.
        assert!(s.watch.checked(vec![running[1].clone()], Some(Instant::now())).await == vec![running[1].clone()]);
        assert!(s.rx.try_recv().is_err(), "one report");
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_an_ordinary_exit_is_left_to_podman_and_not_reported() {
        let mut s = setup();
        s.watch.checked(vec![listed("c1", ExecutionState::running())], Some(Instant::now())).await;
        s.procs.end(10, Some(3));
        tokio::time::sleep(Duration::from_millis(10)).await;
        s.procs.record_exit("c1");
        s.procs.end(9, Some(0));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(s.rx.try_recv().is_err(), "no ghost report for an ordinary exit");
        assert_eq!(s.watch.watched(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_a_container_dead_at_the_agents_start_is_listed_failed_not_running() {
        let mut s = setup();
        s.procs.end(10, None);
        s.procs.end(9, None);
        let checked = s.watch.checked(vec![listed("c1", ExecutionState::running())], Some(Instant::now())).await;
        assert_eq!(checked[0].state, ghost_state(GhostExit { code: None, certain: false }));
        assert!(s.rx.try_recv().is_err(), "the listing carries it");
        // Exited containers are neither looked up nor changed.
        let calls = s.pids.calls.load(Ordering::SeqCst);
        let exited = listed("c2", ExecutionState::failed("Exit code: '3'"));
        assert_eq!(s.watch.checked(vec![exited.clone()], Some(Instant::now())).await, vec![exited]);
        assert_eq!(s.pids.calls.load(Ordering::SeqCst), calls);
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_a_started_container_is_watched_and_a_reused_pid_is_a_ghost_at_once() {
        let mut s = setup();
        s.watch.started(WorkloadId("c2".into()));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(s.watch.watched(), 1);
        s.procs.end(19, Some(137));
        s.procs.end(20, Some(1));
        let ev = tokio::time::timeout(Duration::from_millis(1), s.rx.recv()).await.unwrap().unwrap();
        assert_eq!(ev, ghost_event("c2", Some(1)));
        // c3's pids now belong to someone else (reused): a ghost at once.
        s.pids.table.lock().unwrap().insert("c3".into(), (10, 9));
        s.watch.started(WorkloadId("c3".into()));
        let ev = tokio::time::timeout(Duration::from_millis(1), s.rx.recv()).await.unwrap().unwrap();
        assert_eq!(ev, ghost_event("c3", None));
        // Started again (podman start) with new processes: no longer a ghost.
        s.procs.spawn(30, "c3");
        s.procs.spawn(29, "c3");
        s.pids.table.lock().unwrap().insert("c3".into(), (30, 29));
        s.watch.started(WorkloadId("c3".into()));
        tokio::time::sleep(Duration::from_millis(1)).await;
        let relisted = s.watch.checked(vec![listed("c3", ExecutionState::running())], Some(Instant::now())).await;
        assert_eq!(relisted[0].state.kind, StateKind::Running);
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_containers_that_cannot_be_watched_are_listed_as_podman_says_and_not_looked_up_again() {
        let s = setup();
        s.procs.refuse();
        let running = vec![listed("c1", ExecutionState::running())];
        assert_eq!(s.watch.checked(running.clone(), Some(Instant::now())).await, running);
        assert_eq!(s.watch.checked(running.clone(), Some(Instant::now())).await, running);
        assert_eq!(s.pids.calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_an_uncertain_verdict_is_dropped_when_podman_no_longer_has_it_running() {
        let mut s = setup();
        s.watch.checked(vec![listed("c1", ExecutionState::running())], None).await;
        // Both end without a readable status and without an exit file, and
        // podman has it exited by now (its cleanup removed the exit file).
        s.pids.table.lock().unwrap().remove("c1");
        s.procs.end(10, None);
        s.procs.end(9, None);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(s.rx.try_recv().is_err(), "no ghost report");
        let exited = listed("c1", ExecutionState::succeeded());
        assert_eq!(s.watch.checked(vec![exited.clone()], None).await, vec![exited]);
    }

    #[tokio::test(start_paused = true)]
    async fn ghosts_a_watch_begun_after_a_listing_is_not_forgotten_by_it() {
        let s = setup();
        let taken_at = Instant::now();
        tokio::time::advance(Duration::from_millis(50)).await;
        s.watch.started(WorkloadId("c2".into()));
        tokio::time::sleep(Duration::from_millis(1)).await;
        // The listing, taken before c2 started, does not have it.
        s.watch.checked(vec![], Some(taken_at)).await;
        assert_eq!(s.watch.watched(), 1, "c2's watch stays");
        s.watch.checked(vec![], None).await;
        assert_eq!(s.watch.watched(), 1, "a listing of unknown age forgets nothing");
        s.watch.checked(vec![], Some(Instant::now())).await;
        assert_eq!(s.watch.watched(), 0, "a newer listing without it: forgotten");
    }

    #[test]
    fn ghosts_inspect_lines_read_and_garbage_is_skipped() {
        let out = "abc running 123 120\nbad line\ndef running x 1\nfff running 0 0\nexi exited 0 0\n";
        assert_eq!(
            parse_targets(out),
            vec![
                Target { container_id: "abc".into(), pid: 123, monitor_pid: 120 },
                Target { container_id: "fff".into(), pid: 0, monitor_pid: 0 },
            ]
        );
    }
}
