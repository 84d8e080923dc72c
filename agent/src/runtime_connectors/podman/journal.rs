//! [`JournalTail`]: podman's container events from the systemd journal (the
//! events backend `journald`), read in the agent's own process through
//! libsystemd's sd-journal API. libsystemd is loaded with `dlopen` when the
//! tail is opened, so the agent neither links nor needs it: where
//! `libsystemd.so.0` is missing the watcher falls back to a `podman events`
//! child. The journal's inotify descriptor wakes the tail; entries are read
//! with `sd_journal_next` from the position the tail was opened at.
//!
//! podman writes each event as a journal entry with the fields
//! `PODMAN_EVENT` (status), `PODMAN_TYPE`, `PODMAN_ID`, `PODMAN_NAME`,
//! `PODMAN_EXIT_CODE` (only when not 0) and `PODMAN_LABELS` (the labels as
//! JSON); [`event_from_fields`] turns them into the [`EventLine`] the event
//! log and `podman events` give.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, SystemTime};

use tokio::io::unix::AsyncFd;

use super::cli::EventLine;

/// The library loaded at run time.
const LIBSYSTEMD: &CStr = c"libsystemd.so.0";
/// `SD_JOURNAL_LOCAL_ONLY`: this machine's journal files only.
const LOCAL_ONLY: c_int = 1;
/// `SD_JOURNAL_SYSTEM`: the system's files (root's podman logs there), not
/// every user's.
const SYSTEM: c_int = 4;
/// `sd_journal_process`: files were added or removed (rotation, vacuum).
const INVALIDATE: c_int = 2;

/// Why the journal cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot load {lib}: {reason}")]
    Load { lib: String, reason: String },
    #[error("{call} failed: {source}")]
    Call { call: &'static str, source: std::io::Error },
}

type Journal = c_void;

type OpenFn = unsafe extern "C" fn(*mut *mut Journal, c_int) -> c_int;
type CloseFn = unsafe extern "C" fn(*mut Journal);
type AddMatchFn = unsafe extern "C" fn(*mut Journal, *const c_void, usize) -> c_int;
type SeekFn = unsafe extern "C" fn(*mut Journal, u64) -> c_int;
type StepFn = unsafe extern "C" fn(*mut Journal) -> c_int;
type GetDataFn = unsafe extern "C" fn(*mut Journal, *const c_char, *mut *const c_void, *mut usize) -> c_int;

/// The sd-journal functions the tail calls.
#[derive(Clone, Copy)]
struct Api {
    open: OpenFn,
    close: CloseFn,
    add_match: AddMatchFn,
    seek_realtime_usec: SeekFn,
    next: StepFn,
    get_data: GetDataFn,
    get_fd: StepFn,
    process: StepFn,
}

/// The last `dlerror` message.
fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl call.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        "unknown error".to_owned()
    } else {
        unsafe { CStr::from_ptr(msg) }.to_string_lossy().into_owned()
    }
}

impl Api {
    /// Loads libsystemd (kept loaded for the life of the process).
    fn load() -> Result<Self, JournalError> {
        let load_error = |reason: String| JournalError::Load { lib: LIBSYSTEMD.to_string_lossy().into_owned(), reason };
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed.
        let lib = unsafe { libc::dlopen(LIBSYSTEMD.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(load_error(dl_error()));
        }
        let symbol = |name: &CStr| {
            // SAFETY: dlsym on a live handle with a NUL-terminated name.
            let ptr = unsafe { libc::dlsym(lib, name.as_ptr()) };
            if ptr.is_null() { Err(load_error(dl_error())) } else { Ok(ptr) }
        };
        // SAFETY: each symbol is the sd-journal function of that name, whose C
        // signature (sd-journal(3)) the target type spells out.
        unsafe {
            Ok(Self {
                open: std::mem::transmute::<*mut c_void, OpenFn>(symbol(c"sd_journal_open")?),
                close: std::mem::transmute::<*mut c_void, CloseFn>(symbol(c"sd_journal_close")?),
                add_match: std::mem::transmute::<*mut c_void, AddMatchFn>(symbol(c"sd_journal_add_match")?),
                seek_realtime_usec: std::mem::transmute::<*mut c_void, SeekFn>(symbol(
                    c"sd_journal_seek_realtime_usec",
                )?),
                next: std::mem::transmute::<*mut c_void, StepFn>(symbol(c"sd_journal_next")?),
                get_data: std::mem::transmute::<*mut c_void, GetDataFn>(symbol(c"sd_journal_get_data")?),
                get_fd: std::mem::transmute::<*mut c_void, StepFn>(symbol(c"sd_journal_get_fd")?),
                process: std::mem::transmute::<*mut c_void, StepFn>(symbol(c"sd_journal_process")?),
            })
        }
    }
}

/// A negative sd-journal return value as an error.
fn check(call: &'static str, r: c_int) -> Result<c_int, JournalError> {
    if r < 0 { Err(JournalError::Call { call, source: std::io::Error::from_raw_os_error(-r) }) } else { Ok(r) }
}

/// The journal's inotify descriptor, owned by sd-journal (not closed here).
struct WakeFd(RawFd);

impl AsRawFd for WakeFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// What the tail yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JournalItem {
    /// One container event.
    Event(EventLine),
    /// Entries may have been missed (journal files were rotated or
    /// removed, or waiting failed): the reader should reconcile.
    Gap(&'static str),
}

/// A follower of podman's container events in the journal.
pub struct JournalTail {
    api: Api,
    journal: *mut Journal,
    /// `None` only while dropping (deregistered before the journal closes).
    wake: Option<AsyncFd<WakeFd>>,
    ready: VecDeque<JournalItem>,
}

// SAFETY: an sd_journal object may be used from any thread, one at a time;
// the tail owns it and `&mut self` methods are the only users.
unsafe impl Send for JournalTail {}

impl Drop for JournalTail {
    fn drop(&mut self) {
        self.wake = None;
        // SAFETY: the journal was opened by `since` and is closed once.
        unsafe { (self.api.close)(self.journal) };
    }
}

impl JournalTail {
    /// Opens the journal at `since` (entries from then on are read), with
    /// only podman's container events.
    pub fn since(since: SystemTime) -> Result<Self, JournalError> {
        let api = Api::load()?;
        let mut journal = std::ptr::null_mut();
        let flags = if nix::unistd::geteuid().is_root() { LOCAL_ONLY | SYSTEM } else { LOCAL_ONLY };
        // SAFETY: sd_journal_open writes a new journal object into `journal`.
        check("sd_journal_open", unsafe { (api.open)(&mut journal, flags) })?;
        // From here on `tail` closes the journal whatever fails.
        let mut tail = Self { api, journal, wake: None, ready: VecDeque::new() };
        let only = b"PODMAN_TYPE=container";
        // SAFETY: the match is a byte buffer with its length; sd-journal copies it.
        check("sd_journal_add_match", unsafe { (api.add_match)(journal, only.as_ptr().cast(), only.len()) })?;
        let usec = since.duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_micros();
        let usec = u64::try_from(usec).unwrap_or(u64::MAX);
        // SAFETY: a live journal object.
        check("sd_journal_seek_realtime_usec", unsafe { (api.seek_realtime_usec)(journal, usec) })?;
        // SAFETY: a live journal object; the descriptor stays sd-journal's.
        let fd = check("sd_journal_get_fd", unsafe { (api.get_fd)(journal) })?;
        // SAFETY: the descriptor stays open until the journal is closed in
        // `drop`, which drops this `AsyncFd` first.
        let wake = unsafe { AsyncFd::register_with_interest(WakeFd(fd), tokio::io::Interest::READABLE) }.map_err(
            |source| JournalError::Call { call: "registering the journal's descriptor", source: source.into() },
        )?;
        tail.wake = Some(wake);
        Ok(tail)
    }

    /// The next event or gap. Cancel-safe: entries are only taken from the
    /// journal between awaits.
    pub async fn next(&mut self) -> JournalItem {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return item;
            }
            self.drain();
            if !self.ready.is_empty() {
                continue;
            }
            self.wait().await;
        }
    }

    /// Waits for the journal to change and lets sd-journal take note.
    async fn wait(&mut self) {
        let Some(wake) = &self.wake else { return };
        match wake.readable().await {
            Ok(mut guard) => {
                // SAFETY: a live journal object.
                let r = unsafe { (self.api.process)(self.journal) };
                guard.clear_ready();
                if r == INVALIDATE {
                    self.ready.push_back(JournalItem::Gap("journal files were rotated or removed"));
                }
            }
            Err(e) => {
                tracing::warn!("waiting for the journal failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.ready.push_back(JournalItem::Gap("waiting for the journal failed"));
            }
        }
    }

    /// Moves every entry after the current position to `ready`.
    fn drain(&mut self) {
        // SAFETY: a live journal object.
        while unsafe { (self.api.next)(self.journal) } > 0 {
            let mut fields = HashMap::new();
            for name in ["PODMAN_EVENT", "PODMAN_TYPE", "PODMAN_ID", "PODMAN_NAME", "PODMAN_EXIT_CODE", "PODMAN_LABELS"]
            {
                if let Some(value) = self.field(name) {
                    fields.insert(name, value);
                }
            }
            if let Some(event) = event_from_fields(&fields) {
                self.ready.push_back(JournalItem::Event(event));
            }
        }
    }

    /// The value of field `name` of the current entry.
    fn field(&self, name: &str) -> Option<String> {
        let cname = std::ffi::CString::new(name).ok()?;
        let mut data: *const c_void = std::ptr::null();
        let mut len = 0usize;
        // SAFETY: a live journal positioned at an entry; on success `data`
        // points to `len` bytes "NAME=value" valid until the next call.
        let r = unsafe { (self.api.get_data)(self.journal, cname.as_ptr(), &mut data, &mut len) };
        if r < 0 || data.is_null() {
            return None;
        }
        // SAFETY: see above; copied out at once.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
        let value = bytes.strip_prefix(name.as_bytes())?.strip_prefix(b"=")?;
        Some(String::from_utf8_lossy(value).into_owned())
    }
}

/// The event of one podman journal entry, from its `PODMAN_*` fields;
/// `None` without a `PODMAN_EVENT`.
pub fn event_from_fields(fields: &HashMap<&str, String>) -> Option<EventLine> {
    let text = |k: &str| fields.get(k).cloned().unwrap_or_default();
    Some(EventLine {
        id: text("PODMAN_ID"),
        name: text("PODMAN_NAME"),
        status: fields.get("PODMAN_EVENT")?.clone(),
        kind: text("PODMAN_TYPE"),
        exit_code: fields.get("PODMAN_EXIT_CODE").and_then(|c| c.trim().parse().ok()),
        attributes: fields.get("PODMAN_LABELS").and_then(|l| serde_json::from_str(l).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_fields_of_a_died_event_become_its_event_line() {
        let fields: HashMap<&str, String> = [
            ("PODMAN_EVENT", "died"),
            ("PODMAN_TYPE", "container"),
            ("PODMAN_ID", "1dd2"),
            ("PODMAN_NAME", "x"),
            ("PODMAN_EXIT_CODE", "3"),
            ("PODMAN_LABELS", r#"{"agent":"agent_T","name":"x.abc.agent_T"}"#),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
        let ev = event_from_fields(&fields).unwrap();
        assert_eq!((ev.id.as_str(), ev.status.as_str(), ev.kind.as_str()), ("1dd2", "died", "container"));
        assert_eq!(ev.exit_code, Some(3));
        assert_eq!(ev.attribute("agent"), Some("agent_T"));
        assert_eq!(ev.attribute("name"), Some("x.abc.agent_T"));
    }

    #[test]
    fn journal_fields_without_an_event_or_labels() {
        let mut fields: HashMap<&str, String> = [("PODMAN_TYPE", "container".to_owned())].into_iter().collect();
        assert_eq!(event_from_fields(&fields), None);
        fields.insert("PODMAN_EVENT", "start".into());
        fields.insert("PODMAN_LABELS", "not json".into());
        let ev = event_from_fields(&fields).unwrap();
        assert_eq!((ev.exit_code, ev.attributes), (None, None), "exit code 0 is left out by podman");
    }

    #[tokio::test]
    async fn journal_tail_opens_where_libsystemd_is_installed() {
        // Without libsystemd the open fails naming it; with it (and maybe no
        // journal files at all) the tail opens and has nothing to read yet.
        match JournalTail::since(ank_common::daemon::clock::now()) {
            Ok(mut tail) => {
                let quiet = tokio::time::timeout(Duration::from_millis(100), tail.next()).await;
                assert!(quiet.is_err() || matches!(quiet, Ok(JournalItem::Event(_))), "{quiet:?}");
            }
            Err(e) => assert!(e.to_string().contains("libsystemd.so.0"), "{e}"),
        }
    }
}
