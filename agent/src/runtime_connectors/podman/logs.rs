//! Log streaming through the podman CLI: `podman logs` (or `podman pod
//! logs`) with the request's follow/tail/since/until, stdout and stderr
//! merged line by line into a bounded channel. The child is killed when the
//! receiver is dropped (a cancelled request) or the agent shuts down.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

use super::cli::PodmanCli;
use crate::runtime_connectors::{LogLines, LogOptions, RuntimeError};

/// Lines buffered per stream before the reader waits for the consumer.
const LINE_BUFFER: usize = 256;

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
    let mut child = cli
        .long_running_command(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| RuntimeError::Unavailable(format!("could not run '{}': {e}", cli.binary.display())))?;
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
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if tx.send(line).await.is_err() {
            return;
        }
    }
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
}
