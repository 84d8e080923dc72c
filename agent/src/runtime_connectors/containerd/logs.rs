//! The logs of containerd workloads: the runc shim appends the container's
//! stdout and stderr to one file per container (a `file://` stdio URI), so
//! the output is kept whether or not the agent runs, and nothing but the
//! shim copies it. `ank logs` reads that file: all of it or its last lines,
//! then, when following, what is appended until the task has exited.
//!
//! The shim writes the bytes as they come, without a time per line; the
//! [`super::log_clock`] keeps when each part was written, which answers
//! `--since` and `--until` (to a second).

use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::client::Containerd;
use super::log_clock;
use crate::runtime_connectors::{LogLines, LogOptions, RuntimeError};

/// How often a followed log is read for new output.
pub const FOLLOW_POLL: Duration = Duration::from_millis(100);

/// How often a follower asks whether the task still runs.
const TASK_CHECK: Duration = Duration::from_secs(1);

/// The lines a log stream buffers ahead of its reader.
const CHANNEL: usize = 256;

/// The log file of container `id` under the connector's state folder.
pub fn log_path(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join(id).join("log")
}

/// Streams the log at `path` of container `id` as `options` ask.
pub fn stream(cd: Containerd, id: String, path: PathBuf, options: &LogOptions) -> Result<LogLines, RuntimeError> {
    let now = log_clock::now_ms();
    let bound = |t: &Option<String>| {
        t.as_deref()
            .map(|t| log_clock::parse_time(t, now).map_err(|e| RuntimeError::unavailable(e.to_string())))
            .transpose()
    };
    let (since, until) = (bound(&options.since)?, bound(&options.until)?);
    let mut file = std::fs::File::open(&path)
        .map_err(|e| RuntimeError::unavailable(format!("no log of container '{id}' ({}): {e}", path.display())))?;
    let mut text = Vec::new();
    file.read_to_end(&mut text)
        .map_err(|e| RuntimeError::unavailable(format!("cannot read '{}': {e}", path.display())))?;
    let offset = text.len() as u64;
    let (mut lines, rest) = split_lines(&text);
    if since.is_some() || until.is_some() {
        let stamps = log_clock::read_stamps(&log_clock::times_path(&path));
        let mut start = 0u64;
        lines.retain(|line| {
            let t = log_clock::time_of(&stamps, start, now);
            start += line.len() as u64 + 1;
            since.is_none_or(|s| t >= s) && until.is_none_or(|u| t <= u)
        });
    }
    if let Some(n) = options.tail.filter(|n| *n >= 0) {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let skip = lines.len().saturating_sub(n);
        lines.drain(..skip);
    }
    let (tx, rx) = mpsc::channel(CHANNEL);
    // Following stops at --until, which is in the past or soon.
    let follow = options.follow && until.is_none_or(|u| u > now);
    let rest = rest.to_vec();
    tokio::spawn(async move {
        for line in lines {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        if follow {
            follow_file(cd, &id, file, offset, rest, &tx).await;
        } else if !rest.is_empty() {
            let _ = tx.send(String::from_utf8_lossy(&rest).into_owned()).await;
        }
    });
    Ok(rx)
}

/// The complete lines of `bytes` (without their newlines) and what follows
/// the last newline.
fn split_lines(bytes: &[u8]) -> (VecDeque<String>, &[u8]) {
    let mut lines = VecDeque::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            lines.push_back(String::from_utf8_lossy(&bytes[start..i]).into_owned());
            start = i + 1;
        }
    }
    (lines, &bytes[start..])
}

/// Sends what is appended to `file` from `offset` on, until the task of
/// container `id` no longer runs and all of its output is sent, or the
/// reader goes away.
async fn follow_file(
    cd: Containerd,
    id: &str,
    mut file: std::fs::File,
    mut offset: u64,
    mut pending: Vec<u8>,
    tx: &mpsc::Sender<String>,
) {
    let mut poll = tokio::time::interval(FOLLOW_POLL);
    let mut last_check = tokio::time::Instant::now();
    let mut ended = false;
    loop {
        tokio::select! {
            () = tx.closed() => return,
            _ = poll.tick() => {}
        }
        let mut chunk = Vec::new();
        let read = file.seek(SeekFrom::Start(offset)).and_then(|_| file.read_to_end(&mut chunk));
        if read.is_err() {
            break;
        }
        offset += chunk.len() as u64;
        if chunk.is_empty() {
            if ended {
                break;
            }
            if last_check.elapsed() >= TASK_CHECK {
                last_check = tokio::time::Instant::now();
                // One more read after the task ended: output written just
                // before its exit is sent too.
                ended = !task_runs(&cd, id).await;
            }
            continue;
        }
        pending.extend_from_slice(&chunk);
        let (lines, rest) = split_lines(&pending);
        let rest = rest.to_vec();
        for line in lines {
            if tx.send(line).await.is_err() {
                return;
            }
        }
        pending = rest;
    }
    if !pending.is_empty() {
        let _ = tx.send(String::from_utf8_lossy(&pending).into_owned()).await;
    }
}

/// Whether container `id`'s task is created, running or paused.
async fn task_runs(cd: &Containerd, id: &str) -> bool {
    use containerd_client::types::v1::Status;
    match cd.task(id).await {
        Ok(Some(t)) => !matches!(Status::try_from(t.status), Ok(Status::Stopped)),
        Ok(None) => false,
        // containerd away: keep following, as a podman follower would.
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_newlines_and_keep_the_unfinished_rest() {
        let (lines, rest) = split_lines(b"a\nbb\n\nc");
        assert_eq!(lines, ["a", "bb", ""]);
        assert_eq!(rest, b"c");
        let (lines, rest) = split_lines(b"");
        assert!(lines.is_empty() && rest.is_empty());
    }

    #[tokio::test]
    async fn tail_gives_the_last_lines_and_a_bad_since_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "1\n2\n3\npartial").unwrap();
        let cd = Containerd::new(&dir.path().join("no.sock"), "default");
        let opts = LogOptions { tail: Some(2), ..Default::default() };
        let mut rx = stream(cd.clone(), "c".into(), path.clone(), &opts).unwrap();
        let mut got = Vec::new();
        while let Some(l) = rx.recv().await {
            got.push(l);
        }
        assert_eq!(got, ["2", "3", "partial"]);
        let since = LogOptions { since: Some("soon".into()), ..Default::default() };
        let err = stream(cd.clone(), "c".into(), path, &since).unwrap_err().to_string();
        assert!(err.contains("'soon' is neither a time"), "{err}");
        let missing = stream(cd, "gone".into(), dir.path().join("nope"), &LogOptions::default()).unwrap_err();
        assert!(missing.to_string().contains("no log of container 'gone'"), "{missing}");
    }
}

#[cfg(test)]
mod since_tests {
    use super::*;

    async fn all(mut rx: LogLines) -> Vec<String> {
        let mut got = Vec::new();
        while let Some(l) = rx.recv().await {
            got.push(l);
        }
        got
    }

    #[tokio::test]
    async fn since_and_until_select_lines_by_the_log_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "old\nmid\nnew\n").unwrap();
        let now = log_clock::now_ms();
        let times = format!("4 {}\n8 {}\n", now - 3_600_000, now - 60_000);
        std::fs::write(log_clock::times_path(&path), times).unwrap();
        let cd = Containerd::new(&dir.path().join("no.sock"), "default");
        let opts = |since: Option<&str>, until: Option<&str>| LogOptions {
            since: since.map(str::to_owned),
            until: until.map(str::to_owned),
            ..Default::default()
        };
        let got = all(stream(cd.clone(), "c".into(), path.clone(), &opts(Some("10m"), None)).unwrap()).await;
        assert_eq!(got, ["mid", "new"], "the unstamped end counts as now");
        let got = all(stream(cd.clone(), "c".into(), path.clone(), &opts(Some("2h"), Some("30m"))).unwrap()).await;
        assert_eq!(got, ["old"]);
        let got = all(stream(cd, "c".into(), path, &opts(None, Some("30s"))).unwrap()).await;
        assert_eq!(got, ["old", "mid"]);
    }
}
