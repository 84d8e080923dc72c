//! The decision whether a container that its runtime lists as running is a
//! ghost: its main process is gone (or the pid now belongs to another
//! process) while its monitor (podman's conmon) is dead too, so nobody
//! records the exit. [`open`] decides at once for what is already gone;
//! [`Guard::ended`] waits for the end of the main process and then of the
//! monitor, and calls it a ghost only if no exit was recorded: an ordinary
//! exit is left to the runtime's own report (exit file, event).
//!
//! The processes come through the [`Processes`] trait: real pidfds in
//! production ([`super::PidFds`]), scripted fakes in tests.

use async_trait::async_trait;

/// A process being watched.
#[async_trait]
pub trait Watched: Send + Sync {
    /// Waits until the process has ended.
    async fn exited(&self);
    /// Whether it has ended by now.
    fn has_exited(&self) -> bool;
    /// Its exit code once it ended, if known.
    fn exit_code(&self) -> Option<i32>;
}

/// A process that exists but cannot be watched (no `pidfd_open` in this
/// kernel, no fd left): no verdict, never a ghost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot watch the process: {0}")]
pub struct Unwatchable(pub String);

/// Where the watched processes come from, and whether an exit was recorded.
pub trait Processes: Send + Sync {
    /// The container's main process under `pid`; `None` when the pid is
    /// gone or is not the container's (reused).
    fn open_main(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable>;
    /// The container's monitor under `pid`; `None` when it is gone or not
    /// the container's.
    fn open_monitor(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable>;
    /// Whether the runtime recorded an exit of the container (podman:
    /// conmon's exit file exists).
    fn exit_recorded(&self, container_id: &str) -> bool;
}

/// A running container as its runtime names its processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub container_id: String,
    /// The main process (podman's `State.Pid`); 0 when the runtime has none.
    pub pid: i32,
    /// The monitor (podman's `State.ConmonPid`); 0 when there is none.
    pub monitor_pid: i32,
}

/// The end of a ghost's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GhostExit {
    /// Its exit code, when it could be read.
    pub code: Option<i32>,
}

/// What [`open`] found.
pub enum Opened {
    /// The main process or the monitor lives: wait with [`Guard::ended`].
    Watching(Guard),
    /// Both are gone and no exit was recorded.
    Ghost(GhostExit),
    /// Both are gone and the runtime recorded the exit: its report stands.
    Recorded,
    /// A process could not be watched: no verdict.
    Unwatchable(Unwatchable),
}

/// The open processes of one running container.
pub struct Guard {
    container_id: String,
    main: Option<Box<dyn Watched>>,
    monitor: Option<Box<dyn Watched>>,
}

/// Opens the processes of `target`.
pub fn open(procs: &dyn Processes, target: &Target) -> Opened {
    let id = &target.container_id;
    let opened = procs.open_main(target.pid, id).and_then(|m| Ok((m, procs.open_monitor(target.monitor_pid, id)?)));
    let (main, monitor) = match opened {
        Ok((main, monitor)) => (main.filter(|m| !m.has_exited()), monitor.filter(|m| !m.has_exited())),
        Err(e) => return Opened::Unwatchable(e),
    };
    if main.is_none() && monitor.is_none() {
        if procs.exit_recorded(id) {
            return Opened::Recorded;
        }
        return Opened::Ghost(GhostExit { code: None });
    }
    Opened::Watching(Guard { container_id: id.clone(), main, monitor })
}

impl Guard {
    /// Waits for the end of the main process, then of the monitor (which
    /// records an ordinary exit before it ends); a ghost when no exit was
    /// recorded by then.
    pub async fn ended(self, procs: &dyn Processes) -> Option<GhostExit> {
        let mut code = None;
        if let Some(main) = &self.main {
            main.exited().await;
            code = main.exit_code();
        }
        if let Some(monitor) = &self.monitor {
            monitor.exited().await;
        }
        (!procs.exit_recorded(&self.container_id)).then_some(GhostExit { code })
    }
}

#[cfg(test)]
pub mod fake {
    //! Scripted processes for the tests of the decisions.

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::{Arc, Mutex};

    use tokio::sync::watch;

    use super::*;

    /// One fake process: ends when [`FakeProcesses::end`] is called.
    struct FakeProc {
        ended: watch::Receiver<Option<Option<i32>>>,
    }

    #[async_trait]
    impl Watched for FakeProc {
        async fn exited(&self) {
            let mut rx = self.ended.clone();
            let _ = rx.wait_for(Option::is_some).await;
        }
        fn has_exited(&self) -> bool {
            self.ended.borrow().is_some()
        }
        fn exit_code(&self) -> Option<i32> {
            self.ended.borrow().flatten()
        }
    }

    /// A fake process's end: `Some(exit code)` once it ended.
    type End = watch::Sender<Option<Option<i32>>>;

    /// Processes by pid, each owned by a container id.
    #[derive(Default, Clone)]
    pub struct FakeProcesses {
        procs: Arc<Mutex<BTreeMap<i32, (String, End)>>>,
        recorded: Arc<Mutex<BTreeSet<String>>>,
        refused: Arc<std::sync::atomic::AtomicBool>,
    }

    impl FakeProcesses {
        /// A live process `pid` of container `id`.
        pub fn spawn(&self, pid: i32, id: &str) {
            let (tx, _) = watch::channel(None);
            self.procs.lock().unwrap().insert(pid, (id.to_owned(), tx));
        }
        /// Process `pid` ends with `code` (unknown: `None`).
        pub fn end(&self, pid: i32, code: Option<i32>) {
            if let Some((_, tx)) = self.procs.lock().unwrap().get(&pid) {
                tx.send_replace(Some(code));
            }
        }
        /// The runtime records the exit of `id` (conmon's exit file).
        pub fn record_exit(&self, id: &str) {
            self.recorded.lock().unwrap().insert(id.to_owned());
        }
        /// No process can be watched from now on (a kernel without pidfds).
        pub fn refuse(&self) {
            self.refused.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        fn open(&self, pid: i32, id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
            if self.refused.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(Unwatchable("refused".into()));
            }
            let procs = self.procs.lock().unwrap();
            let Some((owner, tx)) = procs.get(&pid) else { return Ok(None) };
            Ok((owner == id).then(|| Box::new(FakeProc { ended: tx.subscribe() }) as Box<dyn Watched>))
        }
    }

    impl Processes for FakeProcesses {
        fn open_main(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
            self.open(pid, container_id)
        }
        fn open_monitor(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
            self.open(pid, container_id)
        }
        fn exit_recorded(&self, container_id: &str) -> bool {
            self.recorded.lock().unwrap().contains(container_id)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::fake::FakeProcesses;
    use super::*;

    fn target(main: i32, monitor: i32) -> Target {
        Target { container_id: "c1".into(), pid: main, monitor_pid: monitor }
    }

    fn watching(o: Opened) -> Guard {
        match o {
            Opened::Watching(g) => g,
            Opened::Ghost(g) => panic!("ghost {g:?}"),
            Opened::Recorded => panic!("recorded"),
            Opened::Unwatchable(e) => panic!("{e}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn main_and_monitor_killed_without_a_recorded_exit_is_a_ghost_with_the_exit_code() {
        let procs = FakeProcesses::default();
        procs.spawn(10, "c1");
        procs.spawn(9, "c1");
        let guard = watching(open(&procs, &target(10, 9)));
        let task = tokio::spawn({
            let procs = procs.clone();
            async move { guard.ended(&procs).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!task.is_finished(), "nothing ended: still watching");
        procs.end(9, Some(137));
        procs.end(10, Some(137));
        assert_eq!(task.await.unwrap(), Some(GhostExit { code: Some(137) }));
    }

    #[tokio::test(start_paused = true)]
    async fn an_ordinary_exit_recorded_by_the_monitor_is_no_ghost() {
        let procs = FakeProcesses::default();
        procs.spawn(10, "c1");
        procs.spawn(9, "c1");
        let guard = watching(open(&procs, &target(10, 9)));
        let task = tokio::spawn({
            let procs = procs.clone();
            async move { guard.ended(&procs).await }
        });
        procs.end(10, Some(3));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(!task.is_finished(), "the monitor lives: it reports the exit");
        procs.record_exit("c1");
        procs.end(9, Some(0));
        assert_eq!(task.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gone_or_reused_pid_without_a_monitor_is_a_ghost_at_once() {
        let procs = FakeProcesses::default();
        // pid 10 gone, pid 11 someone else's, no monitor.
        procs.spawn(11, "other");
        assert!(matches!(open(&procs, &target(10, 0)), Opened::Ghost(GhostExit { code: None })));
        assert!(matches!(open(&procs, &target(11, 12)), Opened::Ghost(GhostExit { code: None })));
        // The same with the exit recorded: an ordinary exit in flight.
        procs.record_exit("c1");
        assert!(matches!(open(&procs, &target(10, 0)), Opened::Recorded));
    }

    #[tokio::test(start_paused = true)]
    async fn processes_that_cannot_be_watched_are_never_a_ghost() {
        let procs = FakeProcesses::default();
        procs.refuse();
        assert!(matches!(open(&procs, &target(10, 9)), Opened::Unwatchable(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_gone_main_with_a_live_monitor_waits_for_the_monitor() {
        let procs = FakeProcesses::default();
        procs.spawn(9, "c1");
        let guard = watching(open(&procs, &target(10, 9)));
        procs.end(9, None);
        assert_eq!(guard.ended(&procs).await, Some(GhostExit { code: None }));
    }
}
