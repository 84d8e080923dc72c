//! [`HealthBoard`]: the agent's health as the `AgentManager` sees it, the
//! link to the server and the workloads on this node, published as a
//! [`Health`] for systemd (READY=1 at the first ServerHello, STATUS= lines)
//! and for `ank-agent --check` (healthy while connected).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ank_common::daemon::Health;
use tokio::sync::watch;

/// Where the agent `name` answers `--check`: `<run folder>/ank-agent-<name>.sock`.
pub fn socket_path(run_folder: &Path, name: &str) -> PathBuf {
    run_folder.join(format!("ank-agent-{name}.sock"))
}

/// The link as far as health goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Connecting,
    AwaitingHello,
    Connected,
    Lost(SystemTime),
}

/// Publishes the agent's health whenever what it says changes.
#[derive(Debug)]
pub struct HealthBoard {
    tx: watch::Sender<Health>,
    server_url: String,
    link: Link,
    ready: bool,
    stopping: bool,
    workloads: usize,
    running: usize,
}

impl HealthBoard {
    /// A board for an agent of `server_url` that has not connected yet.
    pub fn new(server_url: &str) -> (Self, watch::Receiver<Health>) {
        let (tx, rx) = watch::channel(Health::default());
        let board = Self {
            tx,
            server_url: server_url.to_owned(),
            link: Link::Connecting,
            ready: false,
            stopping: false,
            workloads: 0,
            running: 0,
        };
        board.publish();
        (board, rx)
    }

    /// Another receiver of the published health.
    pub fn subscribe(&self) -> watch::Receiver<Health> {
        self.tx.subscribe()
    }

    /// The stream to the server is open; its hello is still to come.
    pub fn connected(&mut self) {
        self.link = Link::AwaitingHello;
        self.publish();
    }

    /// The server sent its hello: the agent does its job (READY=1 the first time).
    pub fn server_hello(&mut self) {
        self.link = Link::Connected;
        self.ready = true;
        self.publish();
    }

    /// The link is gone; the agent reconnects.
    pub fn disconnected(&mut self) {
        if !matches!(self.link, Link::Lost(_)) {
            self.link = Link::Lost(ank_common::daemon::clock::now());
            self.publish();
        }
    }

    /// The agent is stopping its workloads before it exits.
    pub fn stopping(&mut self) {
        self.stopping = true;
        self.publish();
    }

    /// The workloads of this node and how many of them run.
    pub fn workloads(&mut self, counts: crate::runtime_manager::WorkloadCounts) {
        if (counts.workloads, counts.running) != (self.workloads, self.running) {
            self.workloads = counts.workloads;
            self.running = counts.running;
            self.publish();
        }
    }

    fn publish(&self) {
        let noun = if self.workloads == 1 { "workload" } else { "workloads" };
        let counts = format!("{} {noun} ({} running)", self.workloads, self.running);
        let url = &self.server_url;
        let status = match self.link {
            _ if self.stopping => format!("stopping, {counts}"),
            Link::Connecting => format!("connecting to server {url}, {counts}"),
            Link::AwaitingHello => format!("connected to server {url}, waiting for its hello, {counts}"),
            Link::Connected => format!("connected to server {url}, {counts}"),
            Link::Lost(since) => format!(
                "disconnected from server {url} since {}, reconnecting; {counts} keep running",
                ank_common::timestamp::rfc3339_utc(since)
            ),
        };
        let health = Health {
            ready: self.ready,
            healthy: self.link == Link::Connected && !self.stopping,
            status,
            workloads: self.workloads,
        };
        self.tx.send_if_modified(|old| {
            let changed = *old != health;
            *old = health;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(running: usize, other: usize) -> crate::runtime_manager::WorkloadCounts {
        crate::runtime_manager::WorkloadCounts { workloads: running + other, running }
    }

    #[test]
    fn ready_at_the_first_hello_healthy_only_while_connected() {
        let (mut board, rx) = HealthBoard::new("https://s:25551");
        assert!(!rx.borrow().ready && !rx.borrow().healthy);
        assert_eq!(rx.borrow().status, "connecting to server https://s:25551, 0 workloads (0 running)");
        board.connected();
        assert!(!rx.borrow().ready, "not before the hello");
        board.server_hello();
        board.workloads(states(2, 1));
        assert_eq!(
            *rx.borrow(),
            Health {
                ready: true,
                healthy: true,
                status: "connected to server https://s:25551, 3 workloads (2 running)".into(),
                workloads: 3
            }
        );
        board.disconnected();
        let h = rx.borrow().clone();
        assert!(h.ready && !h.healthy, "ready stays, healthy goes");
        assert!(h.status.starts_with("disconnected from server https://s:25551 since 20"), "{}", h.status);
        assert!(h.status.ends_with("reconnecting; 3 workloads (2 running) keep running"), "{}", h.status);
        board.server_hello();
        assert!(rx.borrow().healthy);
        board.stopping();
        assert!(!rx.borrow().healthy);
        assert_eq!(rx.borrow().status, "stopping, 3 workloads (2 running)");
    }

    #[test]
    fn only_changes_are_published() {
        let (mut board, mut rx) = HealthBoard::new("http://s");
        rx.borrow_and_update();
        board.workloads(states(0, 0));
        assert!(!rx.has_changed().unwrap());
        board.workloads(states(1, 0));
        assert!(rx.has_changed().unwrap());
        assert!(rx.borrow().status.ends_with("1 workload (1 running)"), "{}", rx.borrow().status);
        rx.borrow_and_update();
        board.disconnected();
        rx.borrow_and_update();
        board.disconnected();
        assert!(!rx.has_changed().unwrap(), "the time of the loss stays the first one");
    }
}
