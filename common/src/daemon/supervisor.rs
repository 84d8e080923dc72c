//! The task that tells systemd about a daemon: `READY=1` (with the first
//! status) once the daemon's [`Health`] says ready, `STATUS=` on every
//! change of its status line, `WATCHDOG=1` every half watchdog period but
//! only while the main component answers pings, and `STOPPING=1` when
//! shutdown begins.

use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::health::Health;
use super::notify::{Notifier, NotifyState};
use super::ping::Pinger;

/// Reports `health` to `notifier` until `shutdown`, then says STOPPING=1.
pub async fn supervise(
    notifier: Notifier,
    mut health: watch::Receiver<Health>,
    pinger: Pinger,
    watchdog: Option<Duration>,
    shutdown: CancellationToken,
) {
    let mut ready_sent = false;
    let mut last_status = String::new();
    let mut report = |h: &Health| {
        if h.ready && !ready_sent {
            ready_sent = true;
            last_status.clone_from(&h.status);
            notifier.notify(&[NotifyState::Ready, NotifyState::Status(&h.status)]);
            tracing::debug!("ready: {}", h.status);
        } else if h.status != last_status {
            last_status.clone_from(&h.status);
            notifier.notify(&[NotifyState::Status(&h.status)]);
        }
    };
    report(&health.borrow_and_update().clone());
    let mut ticks = watchdog.map(|period| {
        let mut t = tokio::time::interval(period);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        t
    });
    let mut health_open = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = health.changed(), if health_open => match changed {
                Ok(()) => report(&health.borrow_and_update().clone()),
                Err(_) => health_open = false,
            },
            _ = tick(&mut ticks) => {
                let period = watchdog.unwrap_or_default();
                if pinger.ping(period).await {
                    notifier.notify(&[NotifyState::Watchdog]);
                } else {
                    tracing::error!("main loop did not answer within {period:?}; no watchdog ping sent");
                }
            }
        }
    }
    notifier.notify(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

async fn tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    struct Systemd {
        socket: UnixDatagram,
        _dir: tempfile::TempDir,
    }

    impl Systemd {
        fn new() -> (Self, Notifier) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("notify");
            let socket = UnixDatagram::bind(&path).unwrap();
            socket.set_nonblocking(true).unwrap();
            (Self { socket, _dir: dir }, Notifier::for_socket(path.to_str().unwrap()))
        }

        fn received(&self) -> Vec<String> {
            let mut out = Vec::new();
            let mut buf = [0u8; 512];
            while let Ok(n) = self.socket.recv(&mut buf) {
                out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
            out
        }
    }

    fn health(ready: bool, status: &str) -> Health {
        Health { ready, healthy: ready, status: status.into(), workloads: 0 }
    }

    fn answering_pinger() -> (Pinger, tokio::task::JoinHandle<()>) {
        let (pinger, mut rx) = Pinger::channel();
        let task = tokio::spawn(async move {
            while let Some(p) = rx.recv().await {
                let _ = p.send(());
            }
        });
        (pinger, task)
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ready_once_then_status_changes_then_stopping() {
        let (systemd, notifier) = Systemd::new();
        let (tx, rx) = watch::channel(health(false, "connecting to server"));
        let (pinger, _answers) = answering_pinger();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(supervise(notifier, rx, pinger, None, shutdown.clone()));
        settle().await;
        assert_eq!(
            systemd.received(),
            ["STATUS=connecting to server"],
            "a status, but no READY before the daemon is ready"
        );

        tx.send(health(true, "connected to server, 0 workloads")).unwrap();
        settle().await;
        assert_eq!(systemd.received(), ["READY=1\nSTATUS=connected to server, 0 workloads"]);

        tx.send(health(true, "connected to server, 0 workloads")).unwrap();
        tx.send(health(true, "connected to server, 3 workloads")).unwrap();
        settle().await;
        assert_eq!(systemd.received(), ["STATUS=connected to server, 3 workloads"], "only changes, READY once");

        tx.send(health(false, "disconnected")).unwrap();
        settle().await;
        assert_eq!(systemd.received(), ["STATUS=disconnected"]);

        shutdown.cancel();
        task.await.unwrap();
        assert_eq!(systemd.received(), ["STOPPING=1\nSTATUS=stopping"]);
    }

    #[tokio::test(start_paused = true)]
    async fn watchdog_pings_only_while_the_main_loop_answers() {
        let (systemd, notifier) = Systemd::new();
        let (_tx, rx) = watch::channel(health(true, "serving"));
        let (pinger, answers) = answering_pinger();
        let shutdown = CancellationToken::new();
        let period = Duration::from_secs(15);
        tokio::spawn(supervise(notifier, rx, pinger, Some(period), shutdown.clone()));
        settle().await;
        tokio::time::sleep(period * 2 + Duration::from_millis(10)).await;
        settle().await;
        let got = systemd.received();
        assert_eq!(got[0], "READY=1\nSTATUS=serving");
        assert_eq!(got[1..], ["WATCHDOG=1", "WATCHDOG=1", "WATCHDOG=1"], "at 0 s, 15 s and 30 s");

        answers.abort();
        settle().await;
        tokio::time::sleep(period * 4).await;
        settle().await;
        assert!(systemd.received().is_empty(), "a hung main loop gets no watchdog pings");
        shutdown.cancel();
    }
}
