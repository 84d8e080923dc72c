//! [`PidFd`]: a Linux pidfd on one process, polled with tokio's `AsyncFd`:
//! it becomes readable when the process ends, whoever its parent is (or
//! whether anyone reaps it). Opened first and checked second (see
//! [`cgroup_names`], [`cmdline_names`]), so a pid reused between a
//! runtime's listing and the open is noticed: the pidfd then refers to the
//! other process, which does not belong to the container.
//!
//! The exit code comes from `PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`
//! (Linux >= 6.15, once the process was reaped), else from the zombie's
//! `/proc/<pid>/stat` (while nobody reaped it), else it is unknown.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// Why a pidfd could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum PidFdError {
    /// No process has this pid (or the pid is not a valid one).
    #[error("process {0} does not exist")]
    Gone(i32),
    /// The kernel refused (no `pidfd_open`, out of fds, ...).
    #[error("pidfd_open({pid}) failed: {source}")]
    Open { pid: i32, source: io::Error },
}

/// A pidfd on one process.
#[derive(Debug)]
pub struct PidFd {
    pid: i32,
    fd: AsyncFd<OwnedFd>,
}

/// `ioctl(PIDFD_GET_INFO)`: `_IOWR(0xFF, 11, struct pidfd_info)` with the
/// 64-byte first version of the struct.
const PIDFD_GET_INFO: libc::c_ulong = 0xC040_FF0B;
/// `PIDFD_INFO_EXIT` in `pidfd_info.mask`.
const PIDFD_INFO_EXIT: u64 = 1 << 3;

/// `struct pidfd_info`, version 0 (64 bytes; the kernel fills what fits).
#[repr(C)]
#[derive(Default)]
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    ids: [u32; 11],
    exit_code: i32,
}

impl PidFd {
    /// Opens a pidfd on `pid`; must run inside a tokio runtime with IO.
    pub fn open(pid: i32) -> Result<Self, PidFdError> {
        if pid <= 0 {
            return Err(PidFdError::Gone(pid));
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ESRCH) | Some(libc::EINVAL) => PidFdError::Gone(pid),
                _ => PidFdError::Open { pid, source: e },
            });
        }
        let raw =
            i32::try_from(rc).map_err(|_| PidFdError::Open { pid, source: io::Error::other("fd out of range") })?;
        // SAFETY: `raw` is the new fd just returned by the kernel, owned by nobody else.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the fd is owned by the `AsyncFd` and stays open until it
        // is dropped, which deregisters it first.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .map_err(|e| PidFdError::Open { pid, source: io::Error::from(e) })?;
        Ok(Self { pid, fd })
    }

    /// The pid this pidfd was opened on.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits until the process has ended (returns at once if it has).
    pub async fn exited(&self) {
        // The pidfd stays readable once the process ended; an error of the
        // reactor (none is expected) also ends the wait.
        let _ = self.fd.readable().await;
    }

    /// Whether the process has ended (now, without waiting).
    pub fn has_exited(&self) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd.get_ref().as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n > 0 && pfd.revents & (libc::POLLIN | libc::POLLHUP) != 0
    }

    /// The exit code of the ended process as a shell shows it (128 +
    /// signal for a killed one), if it can be known.
    pub fn exit_code(&self) -> Option<i32> {
        if let Some(status) = self.reaped_status() {
            return Some(code_of_wait_status(status));
        }
        let status = zombie_status(self.pid)?;
        // Reaped (and the pid perhaps reused) while /proc was read: the
        // kernel now has the status itself.
        match self.reaped_status() {
            Some(reaped) => Some(code_of_wait_status(reaped)),
            None => Some(code_of_wait_status(status)),
        }
    }

    /// The wait status `PIDFD_GET_INFO` gives once the process was reaped.
    fn reaped_status(&self) -> Option<i32> {
        let mut info = PidfdInfo { mask: PIDFD_INFO_EXIT, ..PidfdInfo::default() };
        // SAFETY: the struct is the kernel's 64-byte pidfd_info; the fd is ours.
        let rc = unsafe { libc::ioctl(self.fd.get_ref().as_raw_fd(), PIDFD_GET_INFO as _, &mut info) };
        (rc == 0 && info.mask & PIDFD_INFO_EXIT != 0).then_some(info.exit_code)
    }
}

/// The wait status of zombie `pid` (field 52 of `/proc/<pid>/stat`), if
/// `pid` is a zombie.
fn zombie_status(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_zombie_status(&stat)
}

/// Field 52 (`exit_code`) of a `/proc/<pid>/stat` line whose state is `Z`.
pub fn parse_zombie_status(stat: &str) -> Option<i32> {
    // The command name (field 2) may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (the state); field 52 is fields[49].
    if fields.first() != Some(&"Z") {
        return None;
    }
    fields.get(49)?.parse().ok()
}

/// A wait status as an exit code: the code, or 128 + the signal.
pub fn code_of_wait_status(status: i32) -> i32 {
    let signal = status & 0x7f;
    if signal != 0 { 128 + signal } else { (status >> 8) & 0xff }
}

/// Whether process `pid` lives in a cgroup whose path names `container_id`
/// (podman's `libpod-<id>`, containerd's `<namespace>/<id>`).
pub fn cgroup_names(pid: i32, container_id: &str) -> bool {
    !container_id.is_empty()
        && std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains(container_id))
}

/// Whether process `pid` is a `program` (its argv[0]'s file name) with
/// `container_id` among its arguments, as conmon is started for a container.
pub fn cmdline_names(pid: i32, program: &str, container_id: &str) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let mut args = raw.split(|b| *b == 0).map(String::from_utf8_lossy);
    let is_program = args.next().is_some_and(|a| a.rsplit('/').next() == Some(program));
    is_program && !container_id.is_empty() && args.any(|a| a == container_id)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep").arg("30").spawn().expect("spawn sleep (coreutils or busybox)")
    }

    #[tokio::test]
    async fn pidfd_wakes_when_a_killed_child_ends_and_names_its_signal() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        let fd = PidFd::open(pid).unwrap();
        assert!(!fd.has_exited());
        assert!(tokio::time::timeout(Duration::from_millis(50), fd.exited()).await.is_err(), "alive: no wake-up");
        child.kill().unwrap();
        tokio::time::timeout(Duration::from_secs(5), fd.exited()).await.expect("a wake-up after the kill");
        assert!(fd.has_exited());
        // Unreaped: the zombie's /proc stat; reaped: PIDFD_INFO_EXIT (or unknown on older kernels).
        assert_eq!(fd.exit_code(), Some(137));
        child.wait().unwrap();
        let reaped = fd.exit_code();
        assert!(reaped == Some(137) || reaped.is_none(), "{reaped:?}");
    }

    #[tokio::test]
    async fn pidfd_of_a_gone_pid_is_refused_as_gone() {
        let mut child = sleeper();
        let pid = i32::try_from(child.id()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(matches!(PidFd::open(pid), Err(PidFdError::Gone(p)) if p == pid));
        assert!(matches!(PidFd::open(0), Err(PidFdError::Gone(0))));
        assert!(matches!(PidFd::open(-5), Err(PidFdError::Gone(-5))));
    }

    #[tokio::test]
    async fn a_reused_pid_is_not_the_containers_process() {
        // Our own process stands for "someone else's" process under a pid.
        let me = i32::try_from(std::process::id()).unwrap();
        let fd = PidFd::open(me).unwrap();
        assert!(!fd.has_exited());
        assert!(!cgroup_names(me, "0123456789abcdef0123456789abcdef"));
        assert!(!cgroup_names(me, ""));
        assert!(!cmdline_names(me, "conmon", "0123456789abcdef"));
        // `sleep 31`: "31" stands for the container id among the arguments.
        let mut child = std::process::Command::new("sleep").arg("31").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(cmdline_names(pid, "sleep", "31"));
        assert!(!cmdline_names(pid, "sleep", "3"));
        assert!(!cmdline_names(pid, "conmon", "31"));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn zombie_stat_gives_the_wait_status_and_others_none() {
        let tail = (4..=51).map(|i| i.to_string()).collect::<Vec<_>>().join(" ");
        let zombie = format!("42 (sl (ee) p) Z {tail} 9");
        assert_eq!(parse_zombie_status(&zombie), Some(9));
        assert_eq!(parse_zombie_status(&zombie.replace(" Z ", " S ")), None);
        assert_eq!(parse_zombie_status("garbage"), None);
        assert_eq!(parse_zombie_status("1 (x) Z 2"), None);
        assert_eq!(code_of_wait_status(9), 137);
        assert_eq!(code_of_wait_status(3 << 8), 3);
        assert_eq!(code_of_wait_status(0), 0);
    }
}
