//! Sockets in a container's network namespace: a dedicated std thread
//! enters `/proc/<pid>/ns/net` (`setns`), creates and connects a TCP
//! socket there and hands it back. A socket stays in the namespace it was
//! created in, so tokio can use it from any thread afterwards; the thread
//! ends right away (its namespace goes with it). This reaches a container
//! without published ports, on its loopback as well, and needs
//! CAP_SYS_ADMIN (the agent runs as root).
//!
//! Also the HTTP/1.1 GET of an `httpGet` probe, written by hand.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use nix::sched::{CloneFlags, setns};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a socket could not be connected in a namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("cannot enter the network namespace of pid {pid}: {reason}")]
    Namespace { pid: u32, reason: String },
    #[error("{addr}: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    #[error("the host '{0}' is no IP address")]
    Host(String),
    #[error("the thread connecting in the namespace ended without an answer")]
    ThreadGone,
}

impl NetnsError {
    /// Whether the pid may be stale (the container restarted).
    pub fn is_namespace(&self) -> bool {
        matches!(self, NetnsError::Namespace { .. })
    }
}

/// The address of a probe: `host` (an IP address, `localhost`, or
/// 127.0.0.1 when absent) and `port`.
pub fn address(host: Option<&str>, port: u16) -> Result<SocketAddr, NetnsError> {
    let ip = match host.map(str::trim) {
        None | Some("") | Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(h) => h.parse().map_err(|_| NetnsError::Host(h.to_owned()))?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// Connects to `addr` inside the network namespace of `pid`, giving up
/// after `timeout`.
pub async fn connect(pid: u32, addr: SocketAddr, timeout: Duration) -> Result<TcpStream, NetnsError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("probe-netns".into())
        .spawn(move || {
            let _ = tx.send(connect_in_namespace(pid, addr, timeout));
        })
        .map_err(|e| NetnsError::Namespace { pid, reason: format!("no thread: {e}") })?;
    let stream = rx.await.map_err(|_| NetnsError::ThreadGone)??;
    TcpStream::from_std(stream).map_err(|source| NetnsError::Connect { addr, source })
}

/// Runs on its own thread: enters the namespace and connects.
fn connect_in_namespace(pid: u32, addr: SocketAddr, timeout: Duration) -> Result<std::net::TcpStream, NetnsError> {
    let ns =
        File::open(format!("/proc/{pid}/ns/net")).map_err(|e| NetnsError::Namespace { pid, reason: e.to_string() })?;
    setns(&ns, CloneFlags::CLONE_NEWNET).map_err(|e| NetnsError::Namespace { pid, reason: e.to_string() })?;
    let stream =
        std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|source| NetnsError::Connect { addr, source })?;
    stream.set_nonblocking(true).map_err(|source| NetnsError::Connect { addr, source })?;
    Ok(stream)
}

/// The status code of an HTTP/1.1 GET of `path` on a connected stream,
/// and its status line.
pub async fn http_get(stream: &mut TcpStream, addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let path = if path.is_empty() { "/" } else { path };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: ank-agent-probe\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    while !head.windows(2).any(|w| w == b"\r\n") && head.len() < 4096 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default().trim().to_owned();
    parse_status(&line)
        .map(|code| (code, line.clone()))
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("no HTTP status line: '{line}'")))
}

/// The code of `HTTP/1.1 200 OK`.
fn parse_status(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_the_loopback_and_need_an_ip() {
        assert_eq!(address(None, 80).unwrap(), "127.0.0.1:80".parse().unwrap());
        assert_eq!(address(Some("localhost"), 81).unwrap(), "127.0.0.1:81".parse().unwrap());
        assert_eq!(address(Some("::1"), 82).unwrap(), "[::1]:82".parse().unwrap());
        assert!(matches!(address(Some("db.local"), 1), Err(NetnsError::Host(_))));
    }

    #[test]
    fn status_lines_parse() {
        assert_eq!(parse_status("HTTP/1.1 204 No Content"), Some(204));
        assert_eq!(parse_status("HTTP/1.0 500"), Some(500));
        assert_eq!(parse_status("SSH-2.0-OpenSSH"), None);
    }

    /// Our own namespace (as root): a socket connected from the thread
    /// reaches a listener of this process, and the GET reads its status.
    #[tokio::test]
    async fn a_get_in_the_own_namespace_reads_the_status() {
        if !nix::unistd::Uid::effective().is_root() {
            return;
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(String::from_utf8_lossy(&buf[..n]).starts_with("GET /ready HTTP/1.1\r\n"));
            s.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").await.unwrap();
        });
        let mut stream = connect(std::process::id(), addr, Duration::from_secs(2)).await.unwrap();
        let (code, line) = http_get(&mut stream, addr, "/ready").await.unwrap();
        assert_eq!((code, line.as_str()), (503, "HTTP/1.1 503 Service Unavailable"));
        server.await.unwrap();
        let refused = connect(std::process::id(), addr, Duration::from_secs(2)).await.unwrap_err();
        assert!(matches!(refused, NetnsError::Connect { .. }), "{refused}");
        let gone = connect(u32::MAX, addr, Duration::from_secs(1)).await.unwrap_err();
        assert!(gone.is_namespace(), "{gone}");
    }
}
