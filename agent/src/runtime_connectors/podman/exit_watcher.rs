//! The exit watcher: conmon writes `<podman tmp dir>/exits/<container id>`
//! holding the exit code the moment a container's main process ends, while
//! podman's `died` event only follows once podman's cleanup process has run
//! (about 0.1 s later). Watching that folder with inotify reports exits
//! within milliseconds. It only speeds things up: podman's events stay the
//! authority, and an exit file that is already gone when read is ignored.
//!
//! Out: `RuntimeEvent::ChangedById` on the sink, for every container of the
//! host (the `RuntimeManager` hands it to the loop whose workload it is).

use std::path::{Path, PathBuf};

use nix::sys::inotify::AddWatchFlags;
use tokio_util::sync::CancellationToken;

use super::events::exit_state;
use crate::runtime_connectors::inotify::DirWatch;
use crate::runtime_connectors::{Observed, RuntimeEvent, RuntimeEventSender, WorkloadId};

/// The exit code in an exit file.
pub fn parse_exit_file(content: &str) -> Option<i32> {
    content.trim().parse().ok()
}

/// Starts watching `dir`; fails when inotify cannot watch it.
pub fn start(dir: &Path, sink: RuntimeEventSender, shutdown: CancellationToken) -> std::io::Result<()> {
    let watch = DirWatch::new(dir, AddWatchFlags::IN_CLOSE_WRITE | AddWatchFlags::IN_MOVED_TO)?;
    tokio::spawn(run(watch, dir.to_owned(), sink, shutdown));
    Ok(())
}

async fn run(watch: DirWatch, dir: PathBuf, sink: RuntimeEventSender, shutdown: CancellationToken) {
    loop {
        let events = tokio::select! {
            () = shutdown.cancelled() => return,
            batch = watch.next_batch() => match batch {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!("exit watcher on '{}' stopped: {e}", dir.display());
                    return;
                }
            },
        };
        for name in events.into_iter().filter_map(|e| e.name) {
            let Some(id) = name.to_str() else { continue };
            let Ok(content) = std::fs::read_to_string(dir.join(id)) else { continue };
            let Some(code) = parse_exit_file(&content) else { continue };
            let observed = Observed::State(exit_state(code));
            let ev = RuntimeEvent::ChangedById { workload_id: WorkloadId(id.to_owned()), observed };
            if sink.send(ev).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ank_common::execution_state::Failed;
    use ank_common::{ExecutionState, StateKind};
    use tokio::sync::mpsc;

    use super::*;

    #[test]
    fn exit_file_content_is_the_exit_code() {
        assert_eq!(parse_exit_file("3"), Some(3));
        assert_eq!(parse_exit_file("137\n"), Some(137));
        assert_eq!(parse_exit_file(""), None);
        assert_eq!(parse_exit_file("x"), None);
    }

    #[tokio::test]
    async fn exit_watcher_reports_an_exit_file_written_into_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let stop = CancellationToken::new();
        start(dir.path(), tx, stop.clone()).unwrap();
        std::fs::write(dir.path().join("abc123"), "3").unwrap();
        std::fs::write(dir.path().join("def456"), "0").unwrap();
        let first = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        let second = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
        let failed = ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), "Exit code: '3'");
        assert_eq!(
            first,
            RuntimeEvent::ChangedById { workload_id: WorkloadId("abc123".into()), observed: Observed::State(failed) }
        );
        assert_eq!(
            second,
            RuntimeEvent::ChangedById {
                workload_id: WorkloadId("def456".into()),
                observed: Observed::State(ExecutionState::succeeded())
            }
        );
        stop.cancel();
    }
}
