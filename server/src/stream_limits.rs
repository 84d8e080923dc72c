//! How many event subscriptions and log requests one connection may keep
//! open at a time (`--max-subscriptions-per-connection`,
//! `--max-log-requests-per-connection`). A request beyond a limit is
//! answered with an error naming the limit; nothing else changes, and
//! re-using the request id of an open one replaces it instead of counting
//! twice. Each workload's control-interface requests travel on its agent's
//! connection, so the defaults leave room for many workloads per agent.

/// Default of both limits.
pub const DEFAULT_PER_CONNECTION: usize = 256;

/// The limits per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    pub event_subscriptions: usize,
    pub log_requests: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self { event_subscriptions: DEFAULT_PER_CONNECTION, log_requests: DEFAULT_PER_CONNECTION }
    }
}

/// A request beyond a limit; the text goes into the request's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many open {what} on this connection: the limit is {limit} ({flag}); cancel one before opening another")]
pub struct LimitReached {
    /// What is limited, e.g. `event subscriptions`.
    pub what: &'static str,
    pub limit: usize,
    /// The flag that sets the limit.
    pub flag: &'static str,
}

impl StreamLimits {
    /// The refusal of one more event subscription when `open` are open.
    pub fn check_subscriptions(&self, open: usize) -> Result<(), LimitReached> {
        check(open, self.event_subscriptions, "event subscriptions", "--max-subscriptions-per-connection")
    }

    /// The refusal of one more log request when `open` are open.
    pub fn check_log_requests(&self, open: usize) -> Result<(), LimitReached> {
        check(open, self.log_requests, "log requests", "--max-log-requests-per-connection")
    }
}

fn check(open: usize, limit: usize, what: &'static str, flag: &'static str) -> Result<(), LimitReached> {
    if open < limit {
        return Ok(());
    }
    Err(LimitReached { what, limit, flag })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_refuses_the_one_beyond_it_naming_the_flag() {
        let limits = StreamLimits { event_subscriptions: 2, log_requests: 1 };
        assert!(limits.check_subscriptions(1).is_ok());
        let e = limits.check_subscriptions(2).unwrap_err().to_string();
        assert_eq!(
            e,
            "too many open event subscriptions on this connection: the limit is 2 \
             (--max-subscriptions-per-connection); cancel one before opening another"
        );
        assert!(e.contains("limit is 2") && e.contains("--max-subscriptions-per-connection"), "{e}");
        assert!(limits.check_log_requests(0).is_ok());
        assert!(limits.check_log_requests(1).unwrap_err().to_string().contains("--max-log-requests-per-connection"));
    }
}
