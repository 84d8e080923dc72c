//! RFC 3339 timestamps in UTC with milliseconds (`2026-11-23T10:15:30.123Z`),
//! the form Ankaios prints, formatted by `humantime`.

use std::time::{SystemTime, UNIX_EPOCH};

/// `time` as RFC 3339 in UTC with milliseconds; times before 1970 print as
/// the epoch.
pub fn rfc3339_utc(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time.max(UNIX_EPOCH)).to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn timestamps_match_known_dates() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a century leap year) 12:34:56.789
        let t = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(rfc3339_utc(t), "2000-02-29T12:34:56.789Z");
        // 2026-11-23T00:00:00Z
        assert_eq!(rfc3339_utc(UNIX_EPOCH + Duration::from_secs(1_795_392_000)), "2026-11-23T00:00:00.000Z");
        assert_eq!(rfc3339_utc(UNIX_EPOCH + Duration::from_secs(4_107_542_399)), "2100-02-28T23:59:59.000Z");
        assert_eq!(rfc3339_utc(UNIX_EPOCH - Duration::from_secs(1)), "1970-01-01T00:00:00.000Z");
    }
}
