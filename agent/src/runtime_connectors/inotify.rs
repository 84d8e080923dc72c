//! [`DirWatch`]: an inotify instance watching folders, readable from tokio.
//! podman's exit watcher and event-log tail each watch a folder of podman's
//! (`exits/`, `events/`) rather than single files, so that files created,
//! renamed over or deleted there are seen too; containerd's log clock
//! watches its state folder and each container's folder in it.

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::Path;

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::io::unix::AsyncFd;

struct Watch(Inotify);

impl AsRawFd for Watch {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// A non-blocking inotify instance watching one folder.
pub struct DirWatch {
    fd: AsyncFd<Watch>,
}

impl DirWatch {
    /// Watches `dir` for `flags`; fails when the folder is missing or
    /// inotify cannot watch it (permissions, the instance limit).
    pub fn new(dir: &Path, flags: AddWatchFlags) -> std::io::Result<Self> {
        Ok(Self::new_with(dir, flags)?.0)
    }

    /// [`DirWatch::new`], also returning the folder's watch descriptor.
    pub fn new_with(dir: &Path, flags: AddWatchFlags) -> std::io::Result<(Self, WatchDescriptor)> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let wd = inotify.add_watch(dir, flags)?;
        // SAFETY: `Watch` owns the inotify instance, whose file descriptor stays
        // open and unchanged until the `AsyncFd` (and with it the instance) is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(Watch(inotify), tokio::io::Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok((Self { fd }, wd))
    }

    /// Watches one more folder with the same instance.
    pub fn add(&self, dir: &Path, flags: AddWatchFlags) -> std::io::Result<WatchDescriptor> {
        Ok(self.fd.get_ref().0.add_watch(dir, flags)?)
    }

    /// The next batch of events (never empty). Cancel-safe: events are only
    /// taken from the kernel once this returns them.
    pub async fn next_batch(&self) -> std::io::Result<Vec<InotifyEvent>> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|w| w.get_ref().0.read_events().map_err(std::io::Error::from)) {
                Ok(Ok(events)) if !events.is_empty() => return Ok(events),
                Ok(Ok(_)) | Err(_) => continue,
                Ok(Err(e)) => return Err(e),
            }
        }
    }
}
