//! [`LogTail`]: follows an append-only log of lines, here podman's event
//! log, like `tail -F` but without a child process: an inotify watch on the
//! log's folder wakes it, and it reads what was appended since.
//!
//! It starts at the log's current end. A log that does not exist yet is
//! read from its start once it appears (a missing folder is looked for
//! every [`FOLDER_POLL`]). A log replaced by a new file (podman rotates by
//! renaming a copy of the newer half over it) or truncated in place is
//! searched for the last line already handed out and read on after it; if
//! that line is not in it, the new file is read from its start and a
//! [`TailItem::Gap`] says that lines may have been missed. Lines are
//! complete: a line still being written waits for its newline.
//!
//! Reads are plain (blocking) reads of a file in `/run`, a tmpfs: they
//! never wait for a disk.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::inotify::AddWatchFlags;

use crate::runtime_connectors::inotify::DirWatch;

/// How often a missing log folder is looked for.
pub const FOLDER_POLL: Duration = Duration::from_secs(1);

/// A line longer than this is dropped (podman's are below 2 KiB).
pub const MAX_LINE: usize = 1 << 20;

/// How much of the log's end is read at the start to find the last line.
const START_WINDOW: u64 = 64 * 1024;

/// What the tail yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailItem {
    /// One complete line, without its newline.
    Line(String),
    /// Lines may have been missed (the log was replaced or truncated and
    /// the last line read is not in it): the reader should reconcile.
    Gap(&'static str),
}

/// Why a tail cannot follow the log.
#[derive(Debug, thiserror::Error)]
pub enum TailError {
    #[error("'{path}' names no file in a folder")]
    NoFolder { path: PathBuf },
    #[error("cannot watch '{dir}': {source}")]
    Watch { dir: PathBuf, source: std::io::Error },
    #[error("cannot read '{path}': {source}")]
    Read { path: PathBuf, source: std::io::Error },
}

/// The file being read and where.
struct OpenLog {
    file: File,
    /// (device, inode): a different pair under the path is a new file.
    identity: (u64, u64),
    offset: u64,
}

/// A follower of one log file.
pub struct LogTail {
    path: PathBuf,
    dir: PathBuf,
    name: OsString,
    /// `None` while the folder does not exist.
    watch: Option<DirWatch>,
    /// `None` while the log does not exist.
    log: Option<OpenLog>,
    /// Bytes after the last newline.
    pending: Vec<u8>,
    /// Drop everything up to the next newline (after an overlong line).
    skip_partial: bool,
    /// The last complete line read, to find the place again in a new file.
    last_line: Option<Vec<u8>>,
    ready: VecDeque<TailItem>,
}

fn flags() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
}

fn identity(meta: &std::fs::Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

impl LogTail {
    /// Follows `path` from its current end (from its start if it does not
    /// exist yet). Fails when the folder exists but cannot be watched or
    /// the log exists but cannot be read.
    pub fn from_end(path: &Path) -> Result<Self, TailError> {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(TailError::NoFolder { path: path.to_owned() });
        };
        let mut tail = Self {
            path: path.to_owned(),
            dir: if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir.to_owned() },
            name: name.to_owned(),
            watch: None,
            log: None,
            pending: Vec::new(),
            skip_partial: false,
            last_line: None,
            ready: VecDeque::new(),
        };
        match DirWatch::new(&tail.dir, flags()) {
            Ok(w) => tail.watch = Some(w),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(TailError::Watch { dir: tail.dir, source }),
        }
        // Opened after the watch is set up: nothing written in between is lost.
        match File::open(&tail.path) {
            Ok(file) => tail.start_at_end(file).map_err(|source| TailError::Read { path: path.to_owned(), source })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(TailError::Read { path: path.to_owned(), source }),
        }
        Ok(tail)
    }

    /// The log this tail follows.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Positions after the last complete line of `file` and remembers it;
    /// a line still being written at the end is read once complete.
    fn start_at_end(&mut self, file: File) -> std::io::Result<()> {
        let meta = file.metadata()?;
        let size = meta.len();
        let from = size.saturating_sub(START_WINDOW);
        let mut window = vec![0; usize::try_from(size - from).unwrap_or(0)];
        file.read_exact_at(&mut window, from)?;
        let offset = match window.iter().rposition(|&b| b == b'\n') {
            Some(last_newline) => {
                let before = &window[..last_newline];
                let start = before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
                if start > 0 || from == 0 {
                    self.last_line = Some(before[start..].to_vec());
                }
                from + last_newline as u64 + 1
            }
            // No newline in the window: an overlong line; skip it.
            None if size > 0 => {
                self.skip_partial = true;
                size
            }
            None => 0,
        };
        self.log = Some(OpenLog { file, identity: identity(&meta), offset });
        Ok(())
    }

    /// The next line or gap. Cancel-safe: nothing is lost when the future
    /// is dropped.
    pub async fn next(&mut self) -> TailItem {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return item;
            }
            if self.wait().await {
                self.catch_up();
            }
        }
    }

    /// Waits until the folder reports a change; true when it may concern
    /// the log (without a watch: after one poll interval).
    async fn wait(&mut self) -> bool {
        let Some(watch) = &self.watch else {
            tokio::time::sleep(FOLDER_POLL).await;
            match DirWatch::new(&self.dir, flags()) {
                Ok(w) => self.watch = Some(w),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("cannot watch '{}': {e}; trying again", self.dir.display()),
            }
            return true;
        };
        match watch.next_batch().await {
            Ok(events) => {
                let folder_gone =
                    AddWatchFlags::IN_IGNORED | AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF;
                if events.iter().any(|e| e.mask.intersects(folder_gone)) {
                    self.watch = None;
                }
                // Events without a name: the folder itself, or a queue overflow.
                events.iter().any(|e| e.name.as_ref().is_none_or(|n| *n == self.name))
            }
            Err(e) => {
                tracing::warn!("watch of '{}' failed: {e}; watching it again", self.dir.display());
                self.watch = None;
                true
            }
        }
    }

    /// Reads everything new: the rest of the open file, then a file that
    /// replaced it or appeared.
    fn catch_up(&mut self) {
        if let Err(e) = self.read_open() {
            tracing::warn!("reading '{}' failed: {e}", self.path.display());
        }
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            // Deleted (a new one follows) or its folder is gone: keep what we have.
            Err(_) => return,
        };
        if self.log.as_ref().is_some_and(|log| log.identity == identity(&meta)) {
            return;
        }
        let file = match File::open(&self.path) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!("cannot open '{}': {e}", self.path.display());
                return;
            }
        };
        let replaced = self.log.is_some();
        self.pending.clear();
        self.skip_partial = false;
        let Ok(meta) = file.metadata() else { return };
        self.log = Some(OpenLog { file, identity: identity(&meta), offset: 0 });
        let gap = if replaced { self.find_place("the log was replaced") } else { None };
        if let Err(e) = self.read_open() {
            tracing::warn!("reading '{}' failed: {e}", self.path.display());
        }
        self.ready.extend(gap.map(TailItem::Gap));
    }

    /// Reads the open file on; a file shorter than the offset was
    /// truncated and is searched for the place again.
    fn read_open(&mut self) -> std::io::Result<()> {
        let Some(log) = &self.log else { return Ok(()) };
        if log.file.metadata()?.len() < log.offset {
            self.pending.clear();
            self.skip_partial = false;
            let gap = self.find_place("the log was truncated");
            let read = self.read_to_end();
            self.ready.extend(gap.map(TailItem::Gap));
            return read;
        }
        self.read_to_end()
    }

    /// Reads the open file from its offset to its end.
    fn read_to_end(&mut self) -> std::io::Result<()> {
        let mut buf = [0u8; 8192];
        loop {
            let Some(log) = &mut self.log else { return Ok(()) };
            let n = log.file.read_at(&mut buf, log.offset)?;
            if n == 0 {
                return Ok(());
            }
            log.offset += n as u64;
            self.pending.extend_from_slice(&buf[..n]);
            self.split_lines();
        }
    }

    /// Moves complete lines from `pending` to `ready`.
    fn split_lines(&mut self) {
        let mut start = 0;
        while let Some(len) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let line = &self.pending[start..start + len];
            start += len + 1;
            if std::mem::take(&mut self.skip_partial) || line.is_empty() {
                continue;
            }
            if line.len() > MAX_LINE {
                tracing::warn!("dropping a line of {} bytes in '{}'", line.len(), self.path.display());
                continue;
            }
            self.ready.push_back(TailItem::Line(String::from_utf8_lossy(line).into_owned()));
            self.last_line = Some(line.to_vec());
        }
        self.pending.drain(..start);
        if self.pending.len() > MAX_LINE {
            tracing::warn!("dropping a line of more than {MAX_LINE} bytes in '{}'", self.path.display());
            self.pending.clear();
            self.skip_partial = true;
        }
    }

    /// Sets the open file's offset after the last line read before, if it
    /// is in the file; else to its start, returning `why` as the gap to
    /// report once the file is read (after its lines, so that a reconcile
    /// comes last).
    fn find_place(&mut self, why: &'static str) -> Option<&'static str> {
        let log = self.log.as_mut()?;
        let found = self.last_line.as_deref().and_then(|last| offset_after(&log.file, last).ok().flatten());
        log.offset = found.unwrap_or(0);
        found.is_none().then_some(why)
    }
}

/// The offset just after the first line of `file` equal to `line`.
fn offset_after(file: &File, line: &[u8]) -> std::io::Result<Option<u64>> {
    let mut reader = BufReader::new(file.try_clone()?);
    reader.seek(SeekFrom::Start(0))?;
    let mut offset = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf)?;
        if n == 0 || buf.last() != Some(&b'\n') {
            return Ok(None);
        }
        offset += n as u64;
        if &buf[..n - 1] == line {
            return Ok(Some(offset));
        }
    }
}

#[cfg(test)]
mod tests;
