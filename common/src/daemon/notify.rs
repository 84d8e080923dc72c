//! Telling systemd about state changes (sd_notify(3)): the messages are the
//! `sd-notify` crate's [`NotifyState`]s (`READY=1`, `STATUS=…`,
//! `WATCHDOG=1`, `STOPPING=1`) and the watchdog period is its
//! [`sd_notify::watchdog_enabled`] (`WATCHDOG_USEC`, for this process when
//! `WATCHDOG_PID` is unset or ours). Without `NOTIFY_SOCKET` (not started
//! by a `Type=notify` unit) every call is a no-op.
//!
//! Still written here: sending the datagram. `sd_notify::notify` (0.5)
//! connects to `NOTIFY_SOCKET` as a file system path only, so an abstract
//! socket (`@name`, as systemd and container managers may hand out) would
//! be taken for a relative file; and it reads the variable on every call,
//! so a notifier cannot be given its socket (as the supervisor's tests do).

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

pub use sd_notify::NotifyState;

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

    /// Sends `states` as one message, one `KEY=value` line each; failures
    /// are logged, never fatal: the daemon works without its service manager.
    pub fn notify(&self, states: &[NotifyState<'_>]) {
        let Some((socket, addr)) = &self.target else { return };
        let message = states.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
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

/// How often to send `WATCHDOG=1`: half of the watchdog period, when the
/// watchdog is on and meant for this process.
pub fn watchdog_interval() -> Option<Duration> {
    sd_notify::watchdog_enabled().filter(|period| !period.is_zero()).map(|period| period / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_is_half_the_period_and_only_for_this_process() {
        // nextest runs each test in its own process; only this test reads or
        // writes these variables. SAFETY: no other thread touches the
        // environment meanwhile.
        let set = |usec: Option<&str>, pid: Option<String>| unsafe {
            match usec {
                Some(u) => std::env::set_var("WATCHDOG_USEC", u),
                None => std::env::remove_var("WATCHDOG_USEC"),
            }
            match pid {
                Some(p) => std::env::set_var("WATCHDOG_PID", p),
                None => std::env::remove_var("WATCHDOG_PID"),
            }
        };
        let own = std::process::id();
        set(Some("30000000"), None);
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(15)));
        set(Some("30000000"), Some(own.to_string()));
        assert_eq!(watchdog_interval(), Some(Duration::from_secs(15)));
        set(Some("30000000"), Some((own + 1).to_string()));
        assert_eq!(watchdog_interval(), None, "another process's watchdog");
        set(Some("0"), None);
        assert_eq!(watchdog_interval(), None);
        set(Some("soon"), None);
        assert_eq!(watchdog_interval(), None);
        set(None, None);
        assert_eq!(watchdog_interval(), None);
    }

    #[test]
    fn messages_arrive_on_a_path_socket_and_an_abstract_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::for_socket(path.to_str().unwrap());
        assert!(notifier.is_enabled());
        notifier.notify(&[NotifyState::Ready, NotifyState::Status("serving")]);
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("ank-notify-test-{}", std::process::id());
        let abstract_receiver =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
        Notifier::for_socket(&format!("@{name}")).notify(&[NotifyState::Watchdog]);
        let n = abstract_receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn a_missing_or_bad_socket_disables_the_notifier_without_failing() {
        assert!(!Notifier::for_socket("relative/path").is_enabled());
        let notifier = Notifier::for_socket("/nonexistent/dir/notify.sock");
        notifier.notify(&[NotifyState::Ready]);
        assert!(!Notifier::disabled().is_enabled());
    }
}
