//! Log streaming through the podman CLI: `podman logs` (or `podman pod
//! logs`) with the request's follow/tail/since/until, stdout and stderr
//! merged line by line into a bounded channel. The child is killed when the
//! receiver is dropped (a cancelled request) or the agent shuts down.
//!
//! Lines are read as Ankaios reads them: split at `\n` only, bytes that are
//! not UTF-8 replaced, and a line growing beyond [`MAX_LINE_BYTES`] (50 MiB)
//! ends that stream with [`LINE_TOO_LONG`] as its last line.

use std::process::Stdio;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

use super::cli::PodmanCli;
use crate::runtime_connectors::{LogLines, LogOptions, RuntimeError};

/// Lines buffered per stream before the reader waits for the consumer.
const LINE_BUFFER: usize = 256;

/// Longest line read from a log stream.
pub const MAX_LINE_BYTES: usize = 50 * 1024 * 1024;

/// The last line of a stream whose line grew beyond [`MAX_LINE_BYTES`].
pub const LINE_TOO_LONG: &str = "The previous log message exceeded the maximum 50 MB size. Closing the log campaign.";

/// The options part of a `podman logs` command line.
pub fn log_args(options: &LogOptions) -> Vec<String> {
    let mut args = Vec::new();
    if options.follow {
        args.push("--follow".to_owned());
    }
    if let Some(tail) = options.tail.filter(|t| *t >= 0) {
        args.extend(["--tail".to_owned(), tail.to_string()]);
    }
    if let Some(since) = &options.since {
        args.extend(["--since".to_owned(), since.clone()]);
    }
    if let Some(until) = &options.until {
        args.extend(["--until".to_owned(), until.clone()]);
    }
    args
}

/// Runs `podman <args>` and streams its output lines.
// [impl->swdd~podman-uses-podman-cli~1]
pub fn stream(cli: &PodmanCli, args: Vec<String>) -> Result<LogLines, RuntimeError> {
    let mut child =
        cli.long_running_command(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().map_err(|e| {
            RuntimeError::unavailable(super::cli::PodmanError::Spawn {
                binary: cli.binary.display().to_string(),
                reason: e.to_string(),
            })
        })?;
    let (tx, rx) = mpsc::channel(LINE_BUFFER);
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    tokio::spawn(async move {
        let out = pump(stdout, tx.clone());
        let err = pump(stderr, tx.clone());
        tokio::select! {
            _ = async { tokio::join!(out, err) } => {}
            () = tx.closed() => {}
        }
        // Dropping the child kills a still running `podman logs --follow`.
        let _ = child.kill().await;
    });
    Ok(rx)
}

async fn pump(pipe: Option<impl AsyncRead + Unpin>, tx: mpsc::Sender<String>) {
    let Some(pipe) = pipe else { return };
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    loop {
        let line = match read_line(&mut reader, &mut buf, MAX_LINE_BYTES).await {
            Ok(LineRead::Line(line)) => line,
            Ok(LineRead::TooLong) => {
                tracing::warn!("a log line exceeded {MAX_LINE_BYTES} bytes; closing its log stream");
                let _ = tx.send(LINE_TOO_LONG.to_owned()).await;
                return;
            }
            Ok(LineRead::End) => return,
            Err(e) => {
                tracing::warn!("cannot read log lines: {e}");
                return;
            }
        };
        if tx.send(line).await.is_err() {
            return;
        }
    }
}

/// One step of reading a log stream.
#[derive(Debug, PartialEq, Eq)]
enum LineRead {
    /// A line without its `\n` (the last one may have none).
    Line(String),
    /// The line grew beyond the limit; the stream is not read further.
    TooLong,
    End,
}

async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    buf.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() { LineRead::End } else { LineRead::Line(lossy(buf)) });
        }
        if let Some(end) = available.iter().position(|b| *b == b'\n') {
            buf.extend_from_slice(&available[..end]);
            reader.consume(end + 1);
            return Ok(if buf.len() > limit { LineRead::TooLong } else { LineRead::Line(lossy(buf)) });
        }
        let n = available.len();
        buf.extend_from_slice(available);
        reader.consume(n);
        if buf.len() > limit {
            return Ok(LineRead::TooLong);
        }
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_log_args_follow_the_request() {
        assert!(log_args(&LogOptions::default()).is_empty());
        let all = LogOptions { follow: true, tail: Some(5), since: Some("10m".into()), until: Some("1m".into()) };
        assert_eq!(log_args(&all), ["--follow", "--tail", "5", "--since", "10m", "--until", "1m"]);
        assert!(log_args(&LogOptions { tail: Some(-1), ..Default::default() }).is_empty(), "negative tail is all");
    }

    async fn read_all(input: &[u8], limit: usize) -> Vec<LineRead> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let step = read_line(&mut reader, &mut buf, limit).await.unwrap();
            let done = !matches!(step, LineRead::Line(_));
            out.push(step);
            if done {
                return out;
            }
        }
    }

    fn line(s: &str) -> LineRead {
        LineRead::Line(s.to_owned())
    }

    #[tokio::test]
    async fn podman_log_lines_split_at_newlines_and_keep_what_is_not_utf8() {
        let steps = read_all(b"first line\nsecond\r\n\nli\x90ne\nno newline", 1000).await;
        assert_eq!(
            steps,
            [line("first line"), line("second\r"), line(""), line("li\u{fffd}ne"), line("no newline"), LineRead::End]
        );
    }

    #[tokio::test]
    async fn podman_log_line_beyond_the_limit_ends_the_stream() {
        let steps = read_all(b"short\n0123456789abc\nnext\n", 10).await;
        assert_eq!(steps, [line("short"), LineRead::TooLong]);
        let steps = read_all(b"0123456789\n", 10).await;
        assert_eq!(steps, [line("0123456789"), LineRead::End], "the limit itself is fine");
        assert_eq!(MAX_LINE_BYTES, 50 * 1024 * 1024);
    }

    #[tokio::test]
    async fn podman_log_pump_sends_the_notice_as_the_last_line() {
        let (tx, mut rx) = mpsc::channel(8);
        let input = [b"ok\n".as_slice(), &vec![b'x'; MAX_LINE_BYTES + 1], b"\nlost\n"].concat();
        pump(Some(input.as_slice()), tx).await;
        assert_eq!(rx.recv().await.as_deref(), Some("ok"));
        assert_eq!(
            rx.recv().await.as_deref(),
            Some("The previous log message exceeded the maximum 50 MB size. Closing the log campaign.")
        );
        assert_eq!(rx.recv().await, None);
    }
}
