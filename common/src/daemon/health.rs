//! A daemon's health: what it publishes ([`Health`]), the Unix socket it
//! answers on (mode 0600, one JSON line per connection, then closed) and
//! the `--check` client that reads it. The socket only answers after the
//! daemon's main component answered a ping, so a daemon whose loop hangs
//! is reported as not responding.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::ping::Pinger;

/// How long `--check` and a ping may take.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// What a daemon says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Started up once (server: listening; agent: first ServerHello): the
    /// moment of `READY=1`.
    pub ready: bool,
    /// Doing its job now (server: serving; agent: connected to the server).
    pub healthy: bool,
    /// One line for people and `systemctl status`.
    pub status: String,
    /// Workloads it holds (server: in the desired state; agent: on this node).
    pub workloads: usize,
}

/// Answers `--check` on a Unix socket until shutdown; removes it at the end.
pub struct HealthSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl HealthSocket {
    /// Binds `path` (replacing a stale socket, creating the folder), mode 0600.
    pub fn bind(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        match std::fs::remove_file(path) {
            Ok(()) => tracing::debug!("replaced the old health socket '{}'", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Self { listener, path: path.to_owned() })
    }

    /// Binds `path` and serves on it in a task; a socket that cannot be
    /// bound is logged (the daemon runs on, only `--check` cannot reach it).
    pub fn spawn_at(path: &Path, health: watch::Receiver<Health>, pinger: Pinger, shutdown: CancellationToken) {
        match Self::bind(path) {
            Ok(socket) => {
                tokio::spawn(socket.serve(health, pinger, shutdown));
            }
            Err(e) => tracing::error!("no health socket '{}', so --check cannot work: {e}", path.display()),
        }
    }

    /// Serves the latest `health` to every connection until `shutdown`.
    pub async fn serve(self, health: watch::Receiver<Health>, pinger: Pinger, shutdown: CancellationToken) {
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _)) => {
                    let health = health.clone();
                    let pinger = pinger.clone();
                    tokio::spawn(async move { answer(stream, health, pinger).await });
                }
                Err(e) => {
                    tracing::warn!("health socket '{}': {e}", self.path.display());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn answer(mut stream: UnixStream, health: watch::Receiver<Health>, pinger: Pinger) {
    let mut current = health.borrow().clone();
    if !pinger.ping(CHECK_TIMEOUT).await {
        current.healthy = false;
        current.status =
            format!("not responding (main loop did not answer within {CHECK_TIMEOUT:?}); {}", current.status);
    }
    let mut line = serde_json::to_string(&current).unwrap_or_default();
    line.push('\n');
    let _ = tokio::time::timeout(CHECK_TIMEOUT, stream.write_all(line.as_bytes())).await;
}

/// Why `--check` failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("nothing answers on '{path}' ({source}): the daemon is not running, or uses another run folder")]
    NotRunning { path: String, source: std::io::Error },
    #[error("no answer on '{path}' within {timeout:?}")]
    Timeout { path: String, timeout: Duration },
    #[error("unreadable answer on '{path}': {reason}")]
    BadAnswer { path: String, reason: String },
}

/// Reads the health a daemon publishes on `path`.
pub async fn check(path: &Path) -> Result<Health, CheckError> {
    let name = path.display().to_string();
    let read = async {
        let mut stream =
            UnixStream::connect(path).await.map_err(|source| CheckError::NotRunning { path: name.clone(), source })?;
        let mut text = String::new();
        stream
            .read_to_string(&mut text)
            .await
            .map_err(|e| CheckError::BadAnswer { path: name.clone(), reason: e.to_string() })?;
        serde_json::from_str(text.trim())
            .map_err(|e| CheckError::BadAnswer { path: name.clone(), reason: format!("{e}: '{}'", text.trim()) })
    };
    tokio::time::timeout(CHECK_TIMEOUT * 2, read)
        .await
        .map_err(|_| CheckError::Timeout { path: name.clone(), timeout: CHECK_TIMEOUT * 2 })?
}

/// Runs `--check` for a binary: prints the status and returns the exit
/// code: 0 healthy, 1 not healthy or not answering.
pub async fn run_check(binary: &str, path: &Path) -> u8 {
    match check(path).await {
        Ok(h) if h.healthy => {
            println!("{binary}: {}", h.status);
            0
        }
        Ok(h) => {
            println!("{binary}: not healthy: {}", h.status);
            1
        }
        Err(e) => {
            println!("{binary}: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(healthy: bool) -> Health {
        Health { ready: true, healthy, status: "connected to server, 2 workloads".into(), workloads: 2 }
    }

    #[tokio::test]
    async fn check_reads_the_published_health_and_the_socket_goes_at_shutdown() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/ank-agent-A.sock");
        let socket = HealthSocket::bind(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (tx, rx) = watch::channel(health(true));
        let (pinger, mut pings) = Pinger::channel();
        tokio::spawn(async move {
            while let Some(p) = pings.recv().await {
                let _ = p.send(());
            }
        });
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(socket.serve(rx, pinger, shutdown.clone()));

        assert_eq!(check(&path).await.unwrap(), health(true));
        assert_eq!(run_check("ank-agent", &path).await, 0);
        tx.send(health(false)).unwrap();
        assert_eq!(run_check("ank-agent", &path).await, 1);

        shutdown.cancel();
        task.await.unwrap();
        assert!(!path.exists());
        let e = check(&path).await.unwrap_err().to_string();
        assert!(e.contains("nothing answers on") && e.contains("ank-agent-A.sock"), "{e}");
        assert_eq!(run_check("ank-agent", &path).await, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_main_loop_that_does_not_answer_makes_the_daemon_unhealthy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ank-server.sock");
        let socket = HealthSocket::bind(&path).unwrap();
        let (_tx, rx) = watch::channel(health(true));
        let (pinger, _stuck) = Pinger::channel();
        tokio::spawn(socket.serve(rx, pinger, CancellationToken::new()));
        let h = check(&path).await.unwrap();
        assert!(!h.healthy);
        assert!(h.status.starts_with("not responding"), "{}", h.status);
    }

    #[tokio::test]
    async fn a_stale_socket_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        HealthSocket::bind(&path).unwrap();
    }
}
