//! The server's health, for systemd (READY=1 once it listens, STATUS= with
//! the connected agents and workloads) and for `ank-server --check`
//! (healthy while it serves), made from the actor's [`ServerCounts`].

use std::path::{Path, PathBuf};

use ank_common::daemon::Health;
use tokio::sync::watch;

use crate::actor::ServerCounts;

/// Where the server answers `--check`: `<run folder>/ank-server.sock`.
pub fn socket_path(run_folder: &Path) -> PathBuf {
    run_folder.join("ank-server.sock")
}

/// The health of a server listening on `listening` ("127.0.0.1:25551 (mTLS)").
pub fn describe(listening: &str, counts: ServerCounts) -> Health {
    let plural = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    Health {
        ready: true,
        healthy: true,
        status: format!(
            "serving on {listening}, {} connected, {} in the desired state",
            plural(counts.agents, "agent"),
            plural(counts.workloads, "workload")
        ),
        workloads: counts.workloads,
    }
}

/// Follows `counts` and publishes the health; the receiver ends with them.
pub fn follow(mut counts: watch::Receiver<ServerCounts>, listening: String) -> watch::Receiver<Health> {
    let (tx, rx) = watch::channel(describe(&listening, *counts.borrow_and_update()));
    tokio::spawn(async move {
        while counts.changed().await.is_ok() {
            let health = describe(&listening, *counts.borrow_and_update());
            if tx.send(health).is_err() {
                break;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_counts_agents_and_workloads() {
        let h = describe("127.0.0.1:25551 (mTLS)", ServerCounts { agents: 1, workloads: 12 });
        assert_eq!(h.status, "serving on 127.0.0.1:25551 (mTLS), 1 agent connected, 12 workloads in the desired state");
        assert!(h.ready && h.healthy);
        let h = describe("[::]:1 (insecure)", ServerCounts { agents: 0, workloads: 1 });
        assert_eq!(h.status, "serving on [::]:1 (insecure), 0 agents connected, 1 workload in the desired state");
    }

    #[tokio::test]
    async fn changes_of_the_counts_are_followed() {
        let (tx, rx) = watch::channel(ServerCounts::default());
        let mut health = follow(rx, "x".into());
        assert_eq!(health.borrow_and_update().workloads, 0);
        tx.send(ServerCounts { agents: 2, workloads: 3 }).unwrap();
        health.changed().await.unwrap();
        assert_eq!(health.borrow().status, "serving on x, 2 agents connected, 3 workloads in the desired state");
    }
}
