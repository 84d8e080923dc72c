//! Logging of the daemons, set up once in `main`: the level from
//! `--log-level` unless `RUST_LOG` is set (both take per-module filters such
//! as `info,ank_agent::runtime_manager=debug`), one event per line (line
//! breaks inside a message are written as `\n`), on stderr. When stderr is
//! the journal (`JOURNAL_STREAM` names stderr's device and inode, as
//! systemd sets it), lines carry no timestamp, level name or colours but a
//! syslog priority prefix (`<3>` error … `<7>` debug/trace) that journald turns
//! into the entry's priority; on a terminal they are coloured.

use std::io::Write;

use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Where log lines go and how they look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStyle {
    /// journald: priority prefixes, no timestamps, no colours.
    Journal,
    /// A terminal: timestamps and colours.
    Terminal,
    /// A file or pipe: timestamps, no colours.
    Plain,
}

impl LogStyle {
    /// The style for this process's stderr.
    pub fn detect() -> Self {
        let stderr_id = std::fs::metadata("/proc/self/fd/2").ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        });
        if is_journal(std::env::var("JOURNAL_STREAM").ok().as_deref(), stderr_id) {
            LogStyle::Journal
        } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            LogStyle::Terminal
        } else {
            LogStyle::Plain
        }
    }
}

/// Whether `JOURNAL_STREAM` ("DEVICE:INODE") names stderr.
fn is_journal(journal_stream: Option<&str>, stderr_id: Option<(u64, u64)>) -> bool {
    let (Some(var), Some(id)) = (journal_stream, stderr_id) else { return false };
    let Some((dev, ino)) = var.trim().split_once(':') else { return false };
    dev.parse::<u64>().ok() == Some(id.0) && ino.parse::<u64>().ok() == Some(id.1)
}

/// Why logging cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid RUST_LOG '{spec}': {cause}")]
    RustLog { spec: String, cause: tracing_subscriber::filter::ParseError },
    #[error("invalid log level '{level}': {cause}")]
    Level { level: String, cause: tracing_subscriber::filter::ParseError },
    /// A global subscriber is set already.
    #[error("cannot set up logging: {0}")]
    Init(String),
}

/// The filter for `level` (`--log-level`), unless `RUST_LOG` is set.
pub fn filter(level: &str) -> Result<EnvFilter, LoggingError> {
    filter_from(std::env::var("RUST_LOG").ok(), level)
}

fn filter_from(rust_log: Option<String>, level: &str) -> Result<EnvFilter, LoggingError> {
    if let Some(spec) = rust_log
        && !spec.trim().is_empty()
    {
        return EnvFilter::try_new(&spec).map_err(|cause| LoggingError::RustLog { spec, cause });
    }
    EnvFilter::try_new(level).map_err(|cause| LoggingError::Level { level: level.to_owned(), cause })
}

/// Installs the global subscriber for `level` in the detected style.
pub fn init(level: &str) -> Result<LogStyle, LoggingError> {
    let style = LogStyle::detect();
    let filter = filter(level)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(LineWriter { style })
        .with_ansi(style == LogStyle::Terminal);
    let result = match style {
        // The priority prefix says the level.
        LogStyle::Journal => builder.without_time().with_level(false).try_init(),
        LogStyle::Terminal | LogStyle::Plain => builder.try_init(),
    };
    result.map_err(|e| LoggingError::Init(e.to_string()))?;
    Ok(style)
}

/// The syslog priority of a level, as journald reads it from a prefix.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// Makes one [`EventWriter`] per event, knowing the event's level.
#[derive(Debug, Clone, Copy)]
struct LineWriter {
    style: LogStyle,
}

impl<'a> MakeWriter<'a> for LineWriter {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter { prefix: None, buf: Vec::new() }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        let prefix = (self.style == LogStyle::Journal).then(|| priority(meta.level()));
        EventWriter { prefix, buf: Vec::with_capacity(160) }
    }
}

/// Collects one formatted event and writes it to stderr as one line when
/// dropped.
struct EventWriter {
    prefix: Option<u8>,
    buf: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let line = one_line(self.prefix, &self.buf);
        let _ = std::io::stderr().lock().write_all(&line);
    }
}

/// `event` as one line: interior line breaks escaped, the priority prefix
/// in front, exactly one `\n` at the end.
fn one_line(prefix: Option<u8>, event: &[u8]) -> Vec<u8> {
    let body = event.strip_suffix(b"\n").unwrap_or(event);
    let mut line = Vec::with_capacity(body.len() + 8);
    if let Some(p) = prefix {
        line.extend_from_slice(format!("<{p}>").as_bytes());
    }
    for &b in body {
        match b {
            b'\n' => line.extend_from_slice(b"\\n"),
            b'\r' => line.extend_from_slice(b"\\r"),
            _ => line.push(b),
        }
    }
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_must_name_stderr() {
        assert!(is_journal(Some("8:1234"), Some((8, 1234))));
        assert!(!is_journal(Some("8:1234"), Some((8, 999))), "stderr was redirected elsewhere");
        assert!(!is_journal(Some("garbage"), Some((8, 1234))));
        assert!(!is_journal(None, Some((8, 1234))));
        assert!(!is_journal(Some("8:1234"), None));
    }

    #[test]
    fn each_event_is_one_line_with_its_priority_for_the_journal() {
        assert_eq!(
            one_line(Some(3), b"ERROR x: cannot start\ncaused by: y\n"),
            b"<3>ERROR x: cannot start\\ncaused by: y\n"
        );
        assert_eq!(one_line(None, b"INFO started\n"), b"INFO started\n");
        assert_eq!(one_line(None, b"no newline"), b"no newline\n");
        assert_eq!(
            [Level::ERROR, Level::WARN, Level::INFO, Level::DEBUG, Level::TRACE].map(|l| priority(&l)),
            [3, 4, 6, 7, 7]
        );
    }

    #[test]
    fn a_bad_level_or_rust_log_is_an_error_naming_it_and_rust_log_wins() {
        let e = filter_from(None, "info,=nonsense[").unwrap_err().to_string();
        assert!(e.contains("invalid log level 'info,=nonsense['"), "{e}");
        let e = filter_from(Some("ank=[".into()), "info").unwrap_err().to_string();
        assert!(e.contains("invalid RUST_LOG 'ank=['"), "{e}");
        let f = filter_from(Some("ank_agent=trace".into()), "nonsense[").unwrap();
        assert_eq!(f.to_string(), "ank_agent=trace");
        let f = filter_from(Some(" ".into()), "warn,ank_agent::runtime_manager=debug").unwrap();
        assert_eq!(f.to_string(), "ank_agent::runtime_manager=debug,warn");
    }
}
