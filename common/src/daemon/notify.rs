//! The sd_notify(3) protocol, spoken directly: datagrams such as
//! `READY=1`, `STATUS=…`, `WATCHDOG=1` and `STOPPING=1` to the socket that
//! systemd names in `NOTIFY_SOCKET` (a path, or `@name` for the abstract
//! namespace), and the watchdog period from `WATCHDOG_USEC`/`WATCHDOG_PID`.
//! Without `NOTIFY_SOCKET` (not started by a `Type=notify` unit) every call
//! is a no-op.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Sends state changes to the service manager, if there is one.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
}

impl Notifier {
    /// A notifier for the socket in `NOTIFY_SOCKET`; disabled when unset or
    /// unusable (logged).
    pub fn from_env() -> Self {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(path) => Self::for_socket(&path.to_string_lossy()),
            None => Self::disabled(),
        }
    }

    /// A notifier that sends nothing.
    pub fn disabled() -> Self {
        Self { target: None }
    }

    /// A notifier for `socket`: a file system path or `@abstract-name`.
    pub fn for_socket(socket: &str) -> Self {
        match open(socket) {
            Ok(target) => Self { target: Some(target) },
            Err(e) => {
                tracing::warn!("NOTIFY_SOCKET '{socket}' cannot be used, systemd is not told about state changes: {e}");
                Self::disabled()
            }
        }
    }

    /// Whether messages go anywhere.
    pub fn is_enabled(&self) -> bool {
        self.target.is_some()
    }

    /// Sends one message of `KEY=value` lines; failures are logged, never
    /// fatal: the daemon works without its service manager.
    pub fn notify(&self, message: &str) {
        let Some((socket, addr)) = &self.target else { return };
        if let Err(e) = socket.send_to_addr(message.as_bytes(), addr) {
            tracing::debug!("sd_notify '{}' not sent: {e}", message.lines().next().unwrap_or_default());
        }
    }
}

fn open(socket: &str) -> std::io::Result<(UnixDatagram, SocketAddr)> {
    let addr = if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())?
    } else if socket.starts_with('/') {
        SocketAddr::from_pathname(socket)?
    } else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "neither an absolute path nor @name"));
    };
    Ok((UnixDatagram::unbound()?, addr))
}

/// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when the
/// watchdog is on and meant for this process (`WATCHDOG_PID` unset or ours).
pub fn watchdog_interval() -> Option<Duration> {
    watchdog_interval_from(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval_from(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(own_pid)
    {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    Some(Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_is_half_the_period_and_only_for_this_process() {
        assert_eq!(watchdog_interval_from(Some("30000000"), None, 7), Some(Duration::from_secs(15)));
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("7"), 7), Some(Duration::from_secs(15)));
        assert_eq!(watchdog_interval_from(Some("30000000"), Some("8"), 7), None, "another process's watchdog");
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval_from(Some("soon"), None, 7), None);
        assert_eq!(watchdog_interval_from(None, None, 7), None);
    }

    #[test]
    fn messages_arrive_on_a_path_socket_and_an_abstract_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::for_socket(path.to_str().unwrap());
        assert!(notifier.is_enabled());
        notifier.notify("READY=1\nSTATUS=serving");
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("ank-notify-test-{}", std::process::id());
        let abstract_receiver =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        Notifier::for_socket(&format!("@{name}")).notify("WATCHDOG=1");
        let n = abstract_receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn a_missing_or_bad_socket_disables_the_notifier_without_failing() {
        assert!(!Notifier::for_socket("relative/path").is_enabled());
        let notifier = Notifier::for_socket("/nonexistent/dir/notify.sock");
        notifier.notify("READY=1");
        assert!(!Notifier::disabled().is_enabled());
    }
}
