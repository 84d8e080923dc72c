//! Durations as users write them in manifests, config files and flags, in
//! one syntax everywhere: `humantime`'s (`500ms`, `60s`, `5m`, `72h`, `2d`,
//! `1h 30m`, `2weeks`, ...) plus, through this thin adapter, a bare number
//! of seconds (`90`), which the product accepted before it used the crate,
//! and whole milliseconds past the crate's range. As before, results are capped at `u64::MAX` milliseconds (a longer text
//! means the cap, not an error). [`format_duration`] writes a configured
//! duration back exactly; [`format_elapsed`] writes a measured one for
//! people (`5.9s`, `5m 1s`).

use std::time::Duration;

/// A text that is not a duration; the message names the text and the
/// accepted forms (the flag or key is named by whoever reads it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("'{text}' is not a duration like 60s, 5m or 500ms")]
    Malformed { text: String },
    #[error("'{text}': unknown unit '{unit}' (use ms, s, m, h or d)")]
    UnknownUnit { text: String, unit: String },
}

/// The longest duration: `u64::MAX` milliseconds.
const LONGEST: Duration = Duration::from_millis(u64::MAX);

/// Parses `text` (surrounding whitespace ignored).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs).min(LONGEST));
    }
    // Whole milliseconds beyond the crate's nanosecond range (584 years).
    if let Some(ms) = s.strip_suffix("ms").and_then(|n| n.parse::<u64>().ok()) {
        return Ok(Duration::from_millis(ms));
    }
    match humantime::parse_duration(s) {
        Ok(d) => Ok(d.min(LONGEST)),
        // Whole numbers too large for the crate: the cap, as before.
        Err(humantime::DurationError::NumberOverflow) if !s.contains('.') => Ok(LONGEST),
        Err(humantime::DurationError::UnknownUnit { unit, .. }) => {
            Err(DurationError::UnknownUnit { text: text.to_owned(), unit })
        }
        Err(_) => Err(DurationError::Malformed { text: text.to_owned() }),
    }
}

/// A config-file key holding a duration (`'90s'`, `'72h'`), for
/// `#[serde(default, deserialize_with = "ank_common::duration::optional")]`.
pub fn optional<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse_duration(&text).map(Some).map_err(serde::de::Error::custom)
}

/// The shortest text [`parse_duration`] reads back as `d` (whole
/// milliseconds).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms != 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// A measured duration for people, at most two units and never raw
/// milliseconds above 1 s: `740ms`, `5.9s`, `59s`, `5m`, `5m 1s`, `2h 5m`,
/// `3d 4h` (rounded to the smaller unit shown).
pub fn format_elapsed(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let tenths = (ms + 50) / 100;
    if tenths < 600 {
        return match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        };
    }
    let secs = (ms + 500) / 1000;
    let (big, small, small_unit) = if secs < 3600 {
        ((secs / 60, "m"), secs % 60, "s")
    } else {
        let mins = (secs + 30) / 60;
        if mins < 24 * 60 {
            ((mins / 60, "h"), mins % 60, "m")
        } else {
            let hours = (mins + 30) / 60;
            ((hours / 24, "d"), hours % 24, "h")
        }
    };
    match small {
        0 => format!("{}{}", big.0, big.1),
        n => format!("{}{} {n}{small_unit}", big.0, big.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("72h"), Ok(Duration::from_secs(72 * 3600)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(2 * 86400)));
        assert!(parse_duration("5 parsecs").unwrap_err().to_string().contains("unknown unit"));
        assert!(parse_duration("m").unwrap_err().to_string().contains("not a duration"));
        for d in ["1d", "3d", "5h", "1m", "90s", "500ms", "0ms"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }

    #[test]
    fn the_forms_read_before_humantime_keep_their_meaning() {
        assert_eq!(parse_duration(" 0 "), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("18446744073709551615"), Ok(LONGEST), "capped as before");
        assert_eq!(parse_duration("999999999999999d"), Ok(LONGEST));
        assert_eq!(parse_duration("20000000000000ms"), Ok(Duration::from_millis(20_000_000_000_000)));
        assert_eq!(parse_duration("5x").unwrap_err().to_string(), "'5x': unknown unit 'x' (use ms, s, m, h or d)");
        assert_eq!(parse_duration("").unwrap_err().to_string(), "'' is not a duration like 60s, 5m or 500ms");
        assert!(parse_duration("-5s").is_err() && parse_duration("0.5ns").is_err());
        // humantime's forms, now read everywhere (fleet read them before).
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2weeks"), Ok(Duration::from_secs(14 * 86400)));
    }

    #[test]
    fn elapsed_durations_read_as_people_write_them() {
        let cases = [
            (0, "0ms"),
            (999, "999ms"),
            (1000, "1s"),
            (5926, "5.9s"),
            (5960, "6s"),
            (59_949, "59.9s"),
            (59_950, "1m"),
            (300_000, "5m"),
            (300_926, "5m 1s"),
            (3_599_600, "1h"),
            (7_500_000, "2h 5m"),
            (86_400_000, "1d"),
            (3 * 86_400_000 + 4 * 3_600_000 + 20_000, "3d 4h"),
        ];
        for (ms, text) in cases {
            assert_eq!(format_elapsed(Duration::from_millis(ms)), text, "{ms} ms");
        }
    }
}
