//! Liveness pings: a component's loop answers each [`Ping`] it receives, so
//! a watchdog or a health check can tell a running loop from a hung one.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

/// One ping; the component answers by sending `()`.
pub type Ping = oneshot::Sender<()>;

/// Sends pings to one component.
#[derive(Debug, Clone)]
pub struct Pinger {
    tx: mpsc::Sender<Ping>,
}

impl Pinger {
    /// A pinger and the receiver the component selects on.
    pub fn channel() -> (Self, mpsc::Receiver<Ping>) {
        let (tx, rx) = mpsc::channel(4);
        (Self { tx }, rx)
    }

    /// Whether the component answered within `timeout`.
    pub async fn ping(&self, timeout: Duration) -> bool {
        let (answer, answered) = oneshot::channel();
        let round_trip = async { self.tx.send(answer).await.is_ok() && answered.await.is_ok() };
        tokio::time::timeout(timeout, round_trip).await.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_ping_is_answered_by_a_running_loop_and_times_out_on_a_hung_one() {
        let (pinger, mut rx) = Pinger::channel();
        let looping = tokio::spawn(async move {
            if let Some(p) = rx.recv().await {
                let _ = p.send(());
            }
            rx
        });
        assert!(pinger.ping(Duration::from_secs(1)).await);
        let rx = looping.await.unwrap();
        assert!(!pinger.ping(Duration::from_secs(1)).await, "nobody reads the pings any more");
        drop(rx);
        assert!(!pinger.ping(Duration::from_secs(1)).await, "the component is gone");
    }
}
