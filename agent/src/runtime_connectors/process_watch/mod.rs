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

use guard::{Processes, Watched};
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
    /// the container id (`None`: no exit is ever seen as recorded).
    pub exits_dir: Option<PathBuf>,
}

impl PidFds {
    /// Opens `pid` and keeps it when `belongs` says it is the container's.
    fn open_checked(pid: i32, belongs: impl FnOnce(i32) -> bool) -> Option<Box<dyn Watched>> {
        match PidFd::open(pid) {
            // Checked after opening: the pidfd pins the process it refers to.
            Ok(fd) if belongs(pid) => Some(Box::new(fd)),
            Ok(_) | Err(pidfd::PidFdError::Gone(_)) => None,
            Err(e) => {
                tracing::warn!("cannot watch process {pid}: {e}");
                None
            }
        }
    }
}

impl Processes for PidFds {
    fn open_main(&self, pid: i32, container_id: &str) -> Option<Box<dyn Watched>> {
        Self::open_checked(pid, |p| pidfd::cgroup_names(p, container_id))
    }

    fn open_monitor(&self, pid: i32, container_id: &str) -> Option<Box<dyn Watched>> {
        Self::open_checked(pid, |p| pidfd::cmdline_names(p, self.monitor, container_id))
    }

    fn exit_recorded(&self, container_id: &str) -> bool {
        !container_id.is_empty()
            && !container_id.contains('/')
            && self.exits_dir.as_ref().is_some_and(|d| d.join(container_id).exists())
    }
}
