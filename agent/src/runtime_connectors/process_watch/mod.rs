//! Watching the processes of running containers, so that the agent learns
//! of an exit that its runtime does not report: a container whose main
//! process and monitor (podman's conmon) were both killed (the OOM killer
//! on a small ECU) stays "running" in podman's listing forever, with no
//! exit file and no event. A [`pidfd::PidFd`] on the main process and one
//! on the monitor wake the agent when they end ([`guard`] decides whether
//! that is a ghost or an ordinary exit the runtime reports itself).
//!
//! [`PidFds`] is the production [`guard::Processes`]: pidfds checked
//! against the container (the main process's cgroup names the container
//! id, the monitor's command line does), and the runtime's exit-file
//! folder for "an exit was recorded".

pub mod guard;
pub mod pidfd;

use std::path::PathBuf;

use async_trait::async_trait;

use guard::{Processes, Unwatchable, Watched};
use pidfd::PidFd;

#[async_trait]
impl Watched for PidFd {
    async fn exited(&self) {
        PidFd::exited(self).await;
    }
    fn has_exited(&self) -> bool {
        PidFd::has_exited(self)
    }
    fn exit_code(&self) -> Option<i32> {
        PidFd::exit_code(self)
    }
}

/// Real processes: pidfds checked against the container after opening.
#[derive(Debug, Clone)]
pub struct PidFds {
    /// The monitor's program name (`conmon`).
    pub monitor: &'static str,
    /// The folder where the monitor records an exit as a file named by
    /// the container id. Without it (`None`, or no such folder) the watch
    /// cannot tell an ordinary exit from a ghost's and leaves both to the
    /// runtime.
    pub exits_dir: Option<PathBuf>,
}

impl PidFds {
    /// Opens `pid` and keeps it when `belongs` says it is the container's.
    fn open_checked(pid: i32, belongs: impl FnOnce(i32) -> bool) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
        match PidFd::open(pid) {
            // Checked after opening: the pidfd pins the process it refers to.
            Ok(fd) if belongs(pid) => Ok(Some(Box::new(fd))),
            Ok(_) | Err(pidfd::PidFdError::Gone(_)) => Ok(None),
            Err(e) => Err(Unwatchable(e.to_string())),
        }
    }
}

impl Processes for PidFds {
    fn open_main(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
        Self::open_checked(pid, |p| pidfd::cgroup_names(p, container_id))
    }

    fn open_monitor(&self, pid: i32, container_id: &str) -> Result<Option<Box<dyn Watched>>, Unwatchable> {
        Self::open_checked(pid, |p| pidfd::cmdline_names(p, self.monitor, container_id))
    }

    fn exit_recorded(&self, container_id: &str) -> bool {
        match &self.exits_dir {
            Some(dir) if dir.is_dir() && !container_id.is_empty() && !container_id.contains('/') => {
                dir.join(container_id).exists()
            }
            // Cannot tell: whatever happened is left to the runtime.
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_counts_as_recorded_by_its_exit_file_and_when_there_is_no_folder_to_tell() {
        let dir = tempfile::tempdir().unwrap();
        let procs = PidFds { monitor: "conmon", exits_dir: Some(dir.path().to_owned()) };
        assert!(!procs.exit_recorded("abc"));
        std::fs::write(dir.path().join("abc"), "137").unwrap();
        assert!(procs.exit_recorded("abc"));
        assert!(procs.exit_recorded("../x"), "no path outside the folder: cannot tell");
        let missing = PidFds { monitor: "conmon", exits_dir: Some(dir.path().join("missing")) };
        assert!(missing.exit_recorded("abc"), "no folder: cannot tell, left to podman");
        assert!(PidFds { monitor: "conmon", exits_dir: None }.exit_recorded("abc"));
    }

    #[tokio::test]
    async fn a_live_process_outside_the_container_is_opened_as_not_the_containers() {
        let procs = PidFds { monitor: "conmon", exits_dir: None };
        let me = i32::try_from(std::process::id()).unwrap();
        assert!(matches!(procs.open_main(me, "0123456789abcdef"), Ok(None)));
        assert!(matches!(procs.open_monitor(me, "0123456789abcdef"), Ok(None)));
        assert!(matches!(procs.open_main(0, "x"), Ok(None)));
    }
}
