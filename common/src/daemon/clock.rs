//! Wall-clock times that follow `tokio::time`: the first call pins the
//! system time to tokio's clock, later calls add tokio's elapsed time. In
//! a daemon that is the real time; in a test with a paused clock the times
//! of events and retention advance with the virtual clock, so they can be
//! asserted.

use std::sync::OnceLock;
use std::time::SystemTime;

use tokio::time::Instant;

static BASE: OnceLock<(SystemTime, Instant)> = OnceLock::new();

/// The current time by tokio's clock.
// The one place that reads the system's wall clock (clippy.toml).
#[allow(clippy::disallowed_methods)]
pub fn now() -> SystemTime {
    let (wall, start) = *BASE.get_or_init(|| (SystemTime::now(), Instant::now()));
    let now = Instant::now();
    // A paused test clock of another runtime may stand before the base.
    match now.checked_duration_since(start) {
        Some(elapsed) => wall + elapsed,
        None => wall - start.duration_since(now),
    }
}

/// [`now`] as RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    crate::timestamp::rfc3339_utc(now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_the_paused_clock() {
        let a = now();
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        let b = now();
        assert_eq!(b.duration_since(a).unwrap().as_secs(), 3600);
    }
}
