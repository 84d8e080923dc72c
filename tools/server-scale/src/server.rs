//! The server under measurement: a [`ServerProcess`] is a started
//! `ank-server` binary (`--insecure`, a free loopback port, its own
//! TMPDIR so its health socket is its own); a [`Target`] is what the
//! scenarios need of any server, in a process of its own or not.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::error::{Result, ScaleError};

/// The server's stderr, in its temporary folder.
const LOG: &str = "server.log";

/// How long a server may take to listen.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the scenarios reach a server and whose process they measure.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The process whose CPU and memory are measured.
    pub pid: u32,
}

/// A running `ank-server` binary, killed on drop.
pub struct ServerProcess {
    child: tokio::process::Child,
    target: Target,
    _tmp: tempfile::TempDir,
}

impl ServerProcess {
    /// Starts `path --insecure --address 127.0.0.1:PORT` on a free port
    /// and waits until it accepts connections.
    pub async fn start(path: &Path) -> Result<Self> {
        let tmp = tempfile::tempdir().map_err(ScaleError::TempDir)?;
        let addr = free_address().await.map_err(ScaleError::TempDir)?;
        let log = std::fs::File::create(tmp.path().join(LOG)).map_err(ScaleError::TempDir)?;
        let mut child = tokio::process::Command::new(path)
            .args(["--insecure", "--address", &addr])
            .env("TMPDIR", tmp.path())
            .env("RUST_LOG", "warn")
            // Ours pings every peer each second and drops one silent for
            // 2 s; hundreds of in-process agents on a loaded machine miss
            // that, and Ankaios' server has no such heartbeat: 30 s here.
            .env("ANKSERVER_HEARTBEAT_TIMEOUT_MS", "30000")
            .current_dir(tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ScaleError::ServerSpawn { path: path.to_path_buf(), source })?;
        let pid = child.id().unwrap_or_default();
        wait_listening(&mut child, path, &addr).await?;
        Ok(Self { child, target: Target { url: format!("http://{addr}"), pid }, _tmp: tmp })
    }

    /// Its URL and process id.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The first `lines` lines of its stderr that warn or report errors.
    pub fn log_warnings(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self._tmp.path().join(LOG)).unwrap_or_default();
        let warnings = text.lines().filter(|l| l.contains("WARN") || l.contains("ERROR"));
        warnings.take(lines).collect::<Vec<_>>().join("\n")
    }

    /// Kills it and reaps the process.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A loopback address no one listens on now.
async fn free_address() -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    Ok(listener.local_addr()?.to_string())
}

async fn wait_listening(child: &mut tokio::process::Child, path: &Path, addr: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + LISTEN_TIMEOUT;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(ScaleError::ServerExited { path: path.to_path_buf(), status });
        }
        if tokio::time::Instant::now() > deadline {
            let path = PathBuf::from(path);
            return Err(ScaleError::ServerNotListening { path, addr: addr.to_owned(), after: LISTEN_TIMEOUT });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
