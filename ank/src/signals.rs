//! The signals that end `ank`'s waiting and streaming commands, as in
//! Ankaios: SIGINT (Ctrl-C), SIGTERM, SIGQUIT and SIGHUP. Catching them
//! lets a command say goodbye to the server before the process ends, so the
//! server closes its log campaigns and event subscriptions at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// A termination signal `ank` received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by signal {number}")]
pub struct Interrupted {
    /// The signal's number (2 for SIGINT, 15 for SIGTERM).
    pub number: i32,
}

impl Interrupted {
    /// The exit code of a process a shell saw ended by this signal.
    pub fn exit_code(self) -> u8 {
        u8::try_from(128 + self.number).unwrap_or(u8::MAX)
    }
}

/// A future that resolves when the process receives one of the
/// termination signals. The handlers are installed right here, before the
/// future is first polled, so create it before the work it ends begins; a
/// handler that cannot be installed keeps its signal's default action.
pub fn termination() -> impl Future<Output = Interrupted> + Send + 'static {
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    let mut quit = signal(SignalKind::quit()).ok();
    let mut hangup = signal(SignalKind::hangup()).ok();
    async move {
        let number = tokio::select! {
            () = received(&mut interrupt) => 2,
            () = received(&mut terminate) => 15,
            () = received(&mut quit) => 3,
            () = received(&mut hangup) => 1,
        };
        Interrupted { number }
    }
}

async fn received(stream: &mut Option<Signal>) {
    match stream {
        Some(stream) => {
            stream.recv().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_exit_codes_are_the_shells() {
        assert_eq!(Interrupted { number: 2 }.exit_code(), 130);
        assert_eq!(Interrupted { number: 15 }.exit_code(), 143);
    }
}
