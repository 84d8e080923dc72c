//! The log clock: when each part of a containerd workload's log was
//! written, so that `ank logs --since/--until` can be answered. The shim
//! appends the output to the log file without times; the agent watches the
//! connector's state folder with inotify and, when a log grows, appends
//! `<end offset> <unix milliseconds>` to the container's `log.times`: the
//! bytes up to that offset were written by then. It writes at most one
//! entry a second per log (a chatty workload costs one small write a
//! second), so a line's time is at most a second late. Output written while
//! the agent was not running gets the time the agent started again. An idle
//! workload costs nothing: no timer runs while no log grows.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use nix::sys::inotify::{AddWatchFlags, WatchDescriptor};
use tokio_util::sync::CancellationToken;

use crate::runtime_connectors::inotify::DirWatch;

/// The least time between two entries of one log.
pub const RESOLUTION: Duration = Duration::from_secs(1);

/// The times file of the log at `log`.
pub fn times_path(log: &Path) -> PathBuf {
    log.with_file_name("log.times")
}

/// One entry: the log's bytes up to `end` were written by `at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub end: u64,
    pub at_ms: u64,
}

/// The entries of `log.times` (unreadable lines are skipped).
pub fn read_stamps(times: &Path) -> Vec<Stamp> {
    let Ok(text) = std::fs::read_to_string(times) else { return Vec::new() };
    text.lines()
        .filter_map(|l| {
            let (end, at) = l.split_once(' ')?;
            Some(Stamp { end: end.parse().ok()?, at_ms: at.parse().ok()? })
        })
        .collect()
}

/// The time of the byte at `offset`: the first entry that covers it; the
/// bytes after the last entry are "now".
pub fn time_of(stamps: &[Stamp], offset: u64, now_ms: u64) -> u64 {
    let i = stamps.partition_point(|s| s.end <= offset);
    stamps.get(i).map_or(now_ms, |s| s.at_ms)
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    ank_common::daemon::clock::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Appends an entry for the log of container folder `dir` if it grew
/// since its last entry.
fn stamp(dir: &Path, last: &mut HashMap<PathBuf, u64>) {
    let log = dir.join("log");
    let Ok(size) = std::fs::metadata(&log).map(|m| m.len()) else { return };
    let times = times_path(&log);
    let known = *last.entry(dir.to_path_buf()).or_insert_with(|| read_stamps(&times).last().map_or(0, |s| s.end));
    if size <= known {
        return;
    }
    let line = format!("{size} {}\n", now_ms());
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&times)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    match written {
        Ok(()) => {
            last.insert(dir.to_path_buf(), size);
        }
        Err(e) => tracing::debug!("cannot write '{}': {e}", times.display()),
    }
}

/// Watches the container folders under `state_dir` until `shutdown`.
pub fn start(state_dir: PathBuf, shutdown: CancellationToken) -> std::io::Result<()> {
    std::fs::create_dir_all(&state_dir)?;
    let (watch, root) = DirWatch::new_with(&state_dir, AddWatchFlags::IN_CREATE | AddWatchFlags::IN_ONLYDIR)?;
    tokio::spawn(async move {
        let mut clock = Clock { watch, root, state_dir, dirs: HashMap::new(), last: HashMap::new() };
        clock.run(shutdown).await;
    });
    Ok(())
}

struct Clock {
    watch: DirWatch,
    root: WatchDescriptor,
    state_dir: PathBuf,
    /// Watch descriptor -> container folder.
    dirs: HashMap<WatchDescriptor, PathBuf>,
    /// Container folder -> the end of its last entry.
    last: HashMap<PathBuf, u64>,
}

impl Clock {
    fn watch_dir(&mut self, dir: PathBuf) {
        match self.watch.add(&dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE) {
            Ok(wd) => {
                stamp(&dir, &mut self.last);
                self.dirs.insert(wd, dir);
            }
            Err(e) => tracing::debug!("cannot watch '{}': {e}", dir.display()),
        }
    }

    async fn run(&mut self, shutdown: CancellationToken) {
        if let Ok(entries) = std::fs::read_dir(&self.state_dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    self.watch_dir(e.path());
                }
            }
        }
        let mut pending: HashSet<PathBuf> = HashSet::new();
        let mut stamped_at: HashMap<PathBuf, tokio::time::Instant> = HashMap::new();
        let flush = tokio::time::sleep(RESOLUTION);
        tokio::pin!(flush);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = &mut flush, if !pending.is_empty() => {
                    for dir in pending.drain() {
                        stamp(&dir, &mut self.last);
                        stamped_at.insert(dir, tokio::time::Instant::now());
                    }
                }
                batch = self.watch.next_batch() => {
                    let Ok(events) = batch else { return };
                    for ev in events {
                        if ev.wd == self.root {
                            if let Some(name) = ev.name {
                                self.watch_dir(self.state_dir.join(name));
                            }
                            continue;
                        }
                        if ev.mask.contains(AddWatchFlags::IN_IGNORED) {
                            if let Some(dir) = self.dirs.remove(&ev.wd) {
                                self.last.remove(&dir);
                                stamped_at.remove(&dir);
                                pending.remove(&dir);
                            }
                            continue;
                        }
                        if ev.name.as_deref().is_none_or(|n| n != "log") {
                            continue;
                        }
                        let Some(dir) = self.dirs.get(&ev.wd).cloned() else { continue };
                        let now = tokio::time::Instant::now();
                        let recent = stamped_at.get(&dir).is_some_and(|t| now.duration_since(*t) < RESOLUTION);
                        if recent {
                            if pending.is_empty() {
                                flush.as_mut().reset(now + RESOLUTION);
                            }
                            pending.insert(dir);
                        } else {
                            stamp(&dir, &mut self.last);
                            stamped_at.insert(dir, now);
                        }
                    }
                }
            }
        }
    }
}

/// A `--since`/`--until` value that names no time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("'{0}' is before 1970")]
    Before1970(String),
    #[error("'{0}' is neither a time (RFC 3339, Unix seconds) nor a duration (10m)")]
    Unreadable(String),
}

/// Parses a `--since`/`--until` value as podman takes it: an RFC 3339 time,
/// a duration before now (`10m`, `1h30m`) or Unix seconds; milliseconds
/// since the epoch.
pub fn parse_time(text: &str, now_ms: u64) -> Result<u64, TimeError> {
    let t = text.trim();
    if let Ok(time) = humantime::parse_rfc3339_weak(t) {
        return time
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .map_err(|_| TimeError::Before1970(text.to_owned()));
    }
    if let Ok(secs) = t.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok((secs * 1000.0) as u64);
    }
    if let Ok(d) = humantime::parse_duration(t) {
        return Ok(now_ms.saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    }
    Err(TimeError::Unreadable(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_take_the_time_of_the_first_entry_covering_them() {
        let stamps = [Stamp { end: 10, at_ms: 1000 }, Stamp { end: 25, at_ms: 2000 }];
        assert_eq!(time_of(&stamps, 0, 9), 1000);
        assert_eq!(time_of(&stamps, 9, 9), 1000);
        assert_eq!(time_of(&stamps, 10, 9), 2000);
        assert_eq!(time_of(&stamps, 25, 9_999), 9_999, "after the last entry: now");
        assert_eq!(time_of(&[], 0, 5), 5);
    }

    #[test]
    fn times_parse_as_podman_takes_them() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_time("10m", now), Ok(now - 600_000));
        assert_eq!(parse_time("1h30m", now), Ok(now - 5_400_000));
        assert_eq!(parse_time("1700000000", now), Ok(1_700_000_000_000));
        assert_eq!(parse_time("2023-11-14T22:13:20Z", now), Ok(1_700_000_000_000));
        assert!(parse_time("soon", now).unwrap_err().to_string().contains("'soon'"));
    }

    #[test]
    fn stamps_are_appended_only_when_the_log_grew() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("c1");
        std::fs::create_dir_all(&c).unwrap();
        let mut last = HashMap::new();
        stamp(&c, &mut last);
        assert!(read_stamps(&c.join("log.times")).is_empty(), "no log yet");
        std::fs::write(c.join("log"), "a\nb\n").unwrap();
        stamp(&c, &mut last);
        stamp(&c, &mut last);
        let s = read_stamps(&c.join("log.times"));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].end, 4);
        std::fs::write(c.join("log"), "a\nb\nc\n").unwrap();
        // A new clock (an agent started again) reads where the last one was.
        let mut fresh = HashMap::new();
        stamp(&c, &mut fresh);
        let s = read_stamps(&c.join("log.times"));
        assert_eq!(s.iter().map(|s| s.end).collect::<Vec<_>>(), [4, 6]);
    }

    #[tokio::test]
    async fn a_growing_log_is_stamped_by_the_watching_clock() {
        let dir = tempfile::tempdir().unwrap();
        let stop = CancellationToken::new();
        start(dir.path().to_path_buf(), stop.clone()).unwrap();
        let c = dir.path().join("c2");
        std::fs::create_dir_all(&c).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::write(c.join("log"), "hello\n").unwrap();
        let times = c.join("log.times");
        let mut waited = 0;
        while read_stamps(&times).is_empty() {
            assert!(waited < 100, "no stamp within 5 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += 1;
        }
        assert_eq!(read_stamps(&times)[0].end, 6);
        stop.cancel();
    }
}
