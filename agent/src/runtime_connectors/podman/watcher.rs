//! The podman state watcher: one task for the whole agent that turns
//! podman's container events into states of the agent's instances, and a
//! slow reconcile (`podman ps --all`) after every gap in the events and
//! every `reconcile_interval` that catches anything missed (and, for a
//! `podman events` child, when it starts: its replay covers only seconds).
//!
//! The events come from podman's own event log when podman's events
//! backend is `file` ([`LogTail`]) or from the systemd journal when it is
//! `journald` ([`JournalTail`]), both read in the agent's process: no podman
//! process stays alive. Otherwise (or when neither can be read) they come
//! from one long-running `podman events --format json --filter
//! label=agent=<agent>` child, restarted with backoff when it ends (the
//! fallback: about 30 MB for the child). [`open_source`] decides once, at
//! start, in the watcher's task: the agent's start does not wait for
//! podman to name its events backend.
//!
//! Out: `RuntimeEvent::Changed`, `RuntimeEvent::Snapshot` and, when podman
//! stops or starts answering, `RuntimeEvent::Health` on the sink.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use ank_common::StateKind;
use ank_common::conditions::RuntimeHealth;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::time::{Instant, Interval};
use tokio_util::sync::CancellationToken;

use super::cli::{PodmanCli, PodmanError};
use super::events::{event_from, event_from_line, listed_from_ps};
use super::ghosts::GhostWatch;
use super::journal::{JournalItem, JournalTail};
use super::log_tail::{LogTail, TailError, TailItem};
use crate::backoff::Backoff;
use crate::runtime_connectors::{Observed, RuntimeEvent, RuntimeEventSender};

/// How far back a (re)started `podman events` child replays, so that
/// nothing between spawning it and its subscription is lost.
pub const EVENT_REPLAY: &str = "2s";

/// podman's events backend whose log [`LogTail`] can read.
pub const FILE_BACKEND: &str = "file";

/// podman's events backend that [`JournalTail`] can read.
pub const JOURNALD_BACKEND: &str = "journald";

/// Where the watcher reads podman's events from.
pub enum EventSource {
    /// podman's event log, followed from its end.
    Log(LogTail),
    /// podman's events in the systemd journal.
    Journal(JournalTail),
    /// A `podman events` child (any other backend, or a log that cannot be
    /// followed).
    Stream(Child),
}

/// Chooses the event source once, at start, by what podman says the
/// events backend is: `file`: `log` (podman's event log, opened at its end
/// when the watcher was started, so that nothing written since is missed);
/// `journald`: the journal from `started` on; else, or when that cannot be
/// read, a `podman events` child (also when `log` is `None`: the child was
/// asked for). Fails only when that child cannot be spawned (no podman
/// binary).
pub async fn open_source(
    cli: &PodmanCli,
    log: Option<Result<LogTail, TailError>>,
    started: SystemTime,
    label: &str,
) -> Result<EventSource, PodmanError> {
    let Some(log) = log else {
        tracing::info!("container states from a long-running 'podman events' child, as asked");
        return cli.spawn_events(label, EVENT_REPLAY).map(EventSource::Stream);
    };
    let reason = match (cli.events_backend(label).await, log) {
        (Ok(backend), Ok(tail)) if backend == FILE_BACKEND => {
            tracing::info!("container states from podman's event log '{}'", tail.path().display());
            return Ok(EventSource::Log(tail));
        }
        (Ok(backend), Err(e)) if backend == FILE_BACKEND => format!("podman's event log cannot be followed: {e}"),
        (Ok(backend), _) if backend == JOURNALD_BACKEND => match JournalTail::since(started) {
            Ok(journal) => {
                tracing::info!("container states from podman's events in the systemd journal");
                return Ok(EventSource::Journal(journal));
            }
            Err(e) => format!("podman's events in the journal cannot be read: {e}"),
        },
        (Ok(backend), _) => format!("podman's events backend is '{backend}', not '{FILE_BACKEND}'"),
        (Err(e), _) => format!("podman did not name its events backend: {e}"),
    };
    tracing::info!("container states from a long-running 'podman events' child (the fallback): {reason}");
    cli.spawn_events(label, EVENT_REPLAY).map(EventSource::Stream)
}

/// A gap in an in-process feed: events may have been missed.
#[derive(Debug, thiserror::Error)]
enum FeedGap {
    /// In podman's event log file.
    #[error("{why} ('{}')", path.display())]
    Log { why: &'static str, path: std::path::PathBuf },
    /// In the journal.
    #[error("{0}")]
    Journal(&'static str),
}

/// The next item of an in-process feed: the event for this agent, if the
/// entry is one, or the gap.
async fn next_of(feed: &mut EventSource, agent: &str) -> Result<Option<RuntimeEvent>, FeedGap> {
    match feed {
        EventSource::Log(tail) => match tail.next().await {
            TailItem::Line(line) => Ok(event_from_line(&line, agent)),
            TailItem::Gap(why) => Err(FeedGap::Log { why, path: tail.path().to_path_buf() }),
        },
        EventSource::Journal(journal) => match journal.next().await {
            JournalItem::Event(ev) => Ok(event_from(&ev, agent)),
            JournalItem::Gap(why) => Err(FeedGap::Journal(why)),
        },
        EventSource::Stream(_) => std::future::pending().await,
    }
}

/// The running watcher.
pub(super) struct EventWatcher {
    pub cli: PodmanCli,
    /// Told of starts and removals; checks the reconcile's listing.
    pub ghosts: std::sync::Arc<GhostWatch>,
    pub runtime: String,
    pub agent: String,
    pub sink: RuntimeEventSender,
    pub shutdown: CancellationToken,
    pub reconcile_interval: Duration,
    /// Whether podman answered last time (Health is sent on a change).
    pub reachable: AtomicBool,
}

impl EventWatcher {
    pub fn label(agent: &str) -> String {
        format!("agent={agent}")
    }

    /// Chooses the event source (see [`open_source`]) and runs until shutdown.
    pub async fn run(self, log: Option<Result<LogTail, TailError>>, started: SystemTime) {
        match open_source(&self.cli, log, started, &Self::label(&self.agent)).await {
            Ok(EventSource::Stream(child)) => self.run_streams(Some(child)).await,
            Ok(feed) => self.follow_feed(feed).await,
            Err(e) => {
                tracing::warn!("cannot start podman events: {e}");
                self.report_health(RuntimeHealth::Unreachable(e.to_string())).await;
                self.run_streams(None).await;
            }
        }
    }

    /// The reconcile timer: first tick one interval from now.
    fn ticker(&self) -> Interval {
        let mut tick = tokio::time::interval_at(Instant::now() + self.reconcile_interval, self.reconcile_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    }

    /// Sends the event of one line, if it concerns this agent; false when
    /// the receiver is gone.
    async fn forward(&self, line: &str) -> bool {
        match event_from_line(line, &self.agent) {
            Some(ev) => self.pass_on(ev).await,
            None => true,
        }
    }

    /// Sends `ev`, after telling the ghost watch of a start or removal;
    /// false when the receiver is gone.
    async fn pass_on(&self, ev: RuntimeEvent) -> bool {
        if let RuntimeEvent::Changed { workload_id, observed, .. } = &ev {
            match observed {
                Observed::State(s) if s.kind == StateKind::Running => self.ghosts.started(workload_id.clone()),
                Observed::Gone => self.ghosts.forget(workload_id),
                Observed::State(_) => {}
            }
        }
        self.sink.send(ev).await.is_ok()
    }

    /// Follows the event log or the journal until shutdown. No reconcile at
    /// the start: the feed was opened before the runtime manager lists the
    /// existing workloads at the agent's start (the listing the first hello
    /// takes), so together they miss nothing, and a `podman ps` here would
    /// only compete with the first workloads' `podman run`. The first
    /// reconcile is one interval later.
    async fn follow_feed(&self, mut feed: EventSource) {
        let mut tick = self.ticker();
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                item = next_of(&mut feed, &self.agent) => match item {
                    Ok(None) => {}
                    Ok(Some(ev)) => {
                        if !self.pass_on(ev).await {
                            return;
                        }
                    }
                    Err(why) => {
                        tracing::info!("{why}: reconciling with podman ps");
                        self.reconcile().await;
                    }
                },
                _ = tick.tick() => self.reconcile().await,
            }
        }
    }

    /// Runs `podman events` children until shutdown, starting with the
    /// already spawned `first`, if any.
    async fn run_streams(&self, first: Option<Child>) {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut next = first;
        loop {
            let child = match next.take() {
                Some(c) => c,
                None => match self.cli.spawn_events(&Self::label(&self.agent), EVENT_REPLAY) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("cannot start podman events: {e}");
                        self.report_health(RuntimeHealth::Unreachable(e.to_string())).await;
                        if !self.pause(&mut backoff).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            if !self.follow_stream(child, &mut backoff).await {
                return;
            }
            tracing::warn!("podman events stream ended; restarting it");
            if !self.pause(&mut backoff).await {
                return;
            }
        }
    }

    /// Sleeps one backoff step; false when shut down meanwhile.
    async fn pause(&self, backoff: &mut Backoff) -> bool {
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            () = tokio::time::sleep(backoff.next_delay()) => true,
        }
    }

    /// Reads one child's events until it ends (true) or shutdown (false).
    async fn follow_stream(&self, mut child: Child, backoff: &mut Backoff) -> bool {
        let Some(stdout) = child.stdout.take() else {
            return true;
        };
        let mut lines = BufReader::new(stdout).lines();
        self.reconcile().await;
        let mut tick = self.ticker();
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    let _ = child.kill().await;
                    return false;
                }
                line = lines.next_line() => match line {
                    Ok(Some(line)) => {
                        backoff.reset();
                        if !self.forward(&line).await {
                            return false;
                        }
                    }
                    Ok(None) | Err(_) => {
                        let _ = child.kill().await;
                        return true;
                    }
                },
                _ = tick.tick() => self.reconcile().await,
            }
        }
    }

    /// One `podman ps --all` pass, sent as a snapshot.
    // [impl->swdd~podman-state-getter-uses-podmancli~1]
    async fn reconcile(&self) {
        let taken_at = Instant::now();
        match self.cli.ps_by_label(&Self::label(&self.agent)).await {
            Ok(entries) => {
                self.report_health(RuntimeHealth::Reachable).await;
                let workloads = self.ghosts.checked(listed_from_ps(&entries, &self.agent), Some(taken_at)).await;
                let _ =
                    self.sink.send(RuntimeEvent::Snapshot { runtime: self.runtime.clone(), taken_at, workloads }).await;
            }
            Err(e) => {
                tracing::warn!("reconcile with podman ps failed: {e}");
                self.report_health(RuntimeHealth::Unreachable(e.to_string())).await;
            }
        }
    }

    /// Tells the agent when podman becomes reachable or unreachable.
    // [feature H4: the agent's Health condition]
    async fn report_health(&self, health: RuntimeHealth) {
        let reachable = health == RuntimeHealth::Reachable;
        if self.reachable.swap(reachable, Ordering::Relaxed) != reachable {
            let _ = self.sink.send(RuntimeEvent::Health { runtime: self.runtime.clone(), health }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ank_common::ExecutionState;
    use tokio::sync::mpsc;

    use super::*;
    use crate::runtime_connectors::process_watch::PidFds;

    const START: &str = r#"{"ID":"2af2","Name":"w","Status":"start","Time":"2026-11-23T03:13:50Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;

    /// A stand-in podman: `--log-level=debug <command>` names `backend` in its debug line, `ps` lists nothing,
    /// `events` waits; every call's arguments are appended to `calls`.
    fn stand_in(dir: &Path, backend: &str) -> PodmanCli {
        let script = dir.join("podman");
        let body = format!(
            "#!/bin/sh\necho \"$*\" >> '{calls}'\ncase \"$1\" in\n  --log-level=debug) echo 'level=debug msg=\"Initializing event backend {backend}\"' >&2;;\n  events) exec sleep 30;;\n  *) echo '[]';;\nesac\n",
            calls = dir.join("calls").display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        PodmanCli { binary: script, ..PodmanCli::default() }
    }

    fn watcher(cli: PodmanCli, sink: RuntimeEventSender, shutdown: CancellationToken) -> EventWatcher {
        let procs = PidFds { monitor: "conmon", exits_dir: None };
        EventWatcher {
            ghosts: GhostWatch::new(std::sync::Arc::new(procs), std::sync::Arc::new(cli.clone())),
            cli,
            runtime: "podman".into(),
            agent: "agent_T".into(),
            sink,
            shutdown,
            reconcile_interval: Duration::from_secs(3600),
            reachable: true.into(),
        }
    }

    async fn recv(rx: &mut mpsc::Receiver<RuntimeEvent>) -> RuntimeEvent {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.expect("an event in time").expect("open")
    }

    #[tokio::test]
    async fn podman_watcher_reads_the_event_log_of_the_file_backend_and_reconciles_after_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let cli = stand_in(dir.path(), "file");
        let log = dir.path().join("events.log");
        std::fs::write(&log, "{}\n").unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let stop = CancellationToken::new();
        tokio::spawn(watcher(cli, tx, stop.clone()).run(Some(LogTail::from_end(&log)), SystemTime::UNIX_EPOCH));
        // No reconcile at the start: the first thing on the sink is the event.
        let mut appender = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        std::io::Write::write_all(&mut appender, format!("{START}\n").as_bytes()).unwrap();
        match recv(&mut rx).await {
            RuntimeEvent::Changed { instance_name, observed, .. } => {
                assert_eq!(instance_name.to_string(), "y.abc.agent_T");
                assert_eq!(observed, Observed::State(ExecutionState::running()));
            }
            other => panic!("{other:?}"),
        }
        // Replaced by a log without the last line read: a reconcile follows its lines.
        let tmp = dir.path().join("tmp");
        std::fs::write(&tmp, "{\"Status\":\"x\"}\n").unwrap();
        std::fs::rename(&tmp, &log).unwrap();
        assert!(matches!(recv(&mut rx).await, RuntimeEvent::Snapshot { .. }), "a reconcile after the gap");
        stop.cancel();
        let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
        // The start also has the ghost watch inspect the container for its pids (in its own task).
        let (inspects, others): (Vec<&str>, Vec<&str>) =
            calls.lines().partition(|l| l.starts_with("container inspect"));
        assert_eq!(
            others,
            [
                "--log-level=debug ps --all --format json --filter label=agent=agent_T",
                "ps --all --format json --filter label=agent=agent_T"
            ],
            "the backend from the first listing, no podman events child, one reconcile (after the gap)"
        );
        assert!(inspects.len() <= 1 && inspects.iter().all(|l| l.ends_with(" 2af2")), "{inspects:?}");
    }

    #[tokio::test]
    async fn the_starts_events_backend_and_listing_take_one_podman_call_and_later_listings_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let cli = stand_in(dir.path(), "journald");
        let shared = cli.clone();
        let (backend, listed) = tokio::join!(cli.events_backend("agent=a"), shared.ps_for_listing("agent=a"));
        assert_eq!(backend.unwrap(), "journald");
        assert_eq!(listed.unwrap(), vec![]);
        assert!(cli.ps_for_listing("agent=a").await.unwrap().is_empty());
        // Another label than the first listing's is listed on its own.
        let other = stand_in(dir.path(), "file");
        assert_eq!(other.events_backend("agent=a").await.unwrap(), "file");
        assert!(other.ps_for_listing("agent=b").await.unwrap().is_empty());
        let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
        assert_eq!(
            calls.lines().collect::<Vec<_>>(),
            [
                "--log-level=debug ps --all --format json --filter label=agent=a",
                "ps --all --format json --filter label=agent=a",
                "--log-level=debug ps --all --format json --filter label=agent=a",
                "ps --all --format json --filter label=agent=b",
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_first_listing_is_run_again_for_the_start_listing() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("podman");
        let body = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\n[ \"$1\" = --log-level=debug ] && {{ echo 'database is locked' >&2; exit 125; }}\necho '[]'\n",
            dir.path().join("calls").display()
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let cli = PodmanCli { binary: script, ..PodmanCli::default() };
        assert!(cli.ps_for_listing("agent=a").await.unwrap().is_empty());
        let calls = std::fs::read_to_string(dir.path().join("calls")).unwrap();
        assert_eq!(
            calls.lines().collect::<Vec<_>>(),
            [
                "--log-level=debug ps --all --format json --filter label=agent=a",
                "ps --all --format json --filter label=agent=a"
            ]
        );
    }

    #[tokio::test]
    async fn podman_watcher_falls_back_to_a_podman_events_child_for_other_backends() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("events.log");
        let now = ank_common::daemon::clock::now();
        let none = open_source(&stand_in(dir.path(), "none"), Some(LogTail::from_end(&log)), now, "agent=a").await;
        assert!(matches!(none.unwrap(), EventSource::Stream(_)));
        // journald: read in-process where libsystemd can be loaded.
        let journald_cli = stand_in(dir.path(), "journald");
        let journald = open_source(&journald_cli, Some(LogTail::from_end(&log)), now, "agent=a").await;
        match (journald.unwrap(), JournalTail::since(now)) {
            (EventSource::Journal(_), Ok(_)) | (EventSource::Stream(_), Err(_)) => {}
            _ => panic!("the journal is read exactly where it can be opened"),
        }
        // The file backend, but a log that cannot be read.
        let not_a_folder = dir.path().join("a-file");
        std::fs::write(&not_a_folder, "").unwrap();
        let unreadable = LogTail::from_end(&not_a_folder.join("events.log"));
        assert!(unreadable.is_err());
        let file = open_source(&stand_in(dir.path(), "file"), Some(unreadable), now, "agent=a").await.unwrap();
        assert!(matches!(file, EventSource::Stream(_)));
        let asked = open_source(&stand_in(dir.path(), "file"), None, now, "agent=a").await.unwrap();
        assert!(matches!(asked, EventSource::Stream(_)));
        let missing = PodmanCli { binary: dir.path().join("no-podman"), ..PodmanCli::default() };
        let no_podman = open_source(&missing, Some(LogTail::from_end(&log)), now, "agent=a").await;
        assert!(matches!(no_podman, Err(PodmanError::Spawn { .. })));
    }
}
