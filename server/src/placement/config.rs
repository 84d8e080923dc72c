//! How placement is configured: the parsers of the `--scheduler-*` and
//! `--metric-range NAME=MIN:MAX[:lower]` flags, of the values of the
//! `[scheduler]` and `[metrics.<name>]` tables of `ank-server.conf` (whose
//! keys `crate::config_file` declares), and the [`PlacementSettings`] built
//! from the merged values. This module knows no clap struct.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::{MetricRange, PlacementSettings};

/// One `[metrics.<name>]` table.
#[derive(Debug, Deserialize)]
struct MetricKeys {
    min: f64,
    max: f64,
    #[serde(default = "higher_is_better", alias = "higherIsBetter")]
    higher_is_better: bool,
}

fn higher_is_better() -> bool {
    true
}

/// The `[metrics]` table: metric name -> checked range.
pub fn metrics_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<(String, MetricRange)>>, D::Error> {
    let raw: BTreeMap<String, MetricKeys> = BTreeMap::deserialize(d)?;
    raw.into_iter()
        .map(|(name, k)| {
            MetricRange::new(k.min, k.max, k.higher_is_better)
                .map(|r| (name.clone(), r))
                .map_err(|e| serde::de::Error::custom(format!("metric '{name}': {e}")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The `[scheduler]` table's `stickiness` key: a finite weight >= 0.
pub fn stickiness_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    parse_stickiness(&f64::deserialize(d)?.to_string()).map(Some).map_err(serde::de::Error::custom)
}

/// A value of a placement flag or key that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlacementValueError {
    #[error("stickiness '{0}' must be a number >= 0")]
    Stickiness(String),
    #[error(transparent)]
    Duration(#[from] ank_common::duration::DurationError),
    #[error("'{0}' is shorter than the server's 1 s tick")]
    ShorterThanTick(String),
    #[error("metric range '{0}' is not of the form NAME=MIN:MAX or NAME=MIN:MAX:lower")]
    MetricRangeForm(String),
    /// A range the metric cannot have (min not below max, ...).
    #[error("'{text}': {reason}")]
    MetricRange { text: String, reason: String },
}

/// `--scheduler-stickiness`: a finite weight >= 0.
pub fn parse_stickiness(text: &str) -> Result<f64, PlacementValueError> {
    match text.trim().parse::<f64>() {
        Ok(w) if w.is_finite() && w >= 0.0 => Ok(w),
        _ => Err(PlacementValueError::Stickiness(text.to_owned())),
    }
}

/// `--scheduler-reschedule-after` and `--scheduler-agent-loss-grace`: a
/// duration of at least one second.
pub fn parse_interval(text: &str) -> Result<Duration, PlacementValueError> {
    let d = ank_common::duration::parse_duration(text)?;
    if d < Duration::from_secs(1) {
        return Err(PlacementValueError::ShorterThanTick(text.to_owned()));
    }
    Ok(d)
}

/// `--metric-range NAME=MIN:MAX[:lower]` (`:higher` is the default).
pub fn parse_metric_range(text: &str) -> Result<(String, MetricRange), PlacementValueError> {
    let bad = || PlacementValueError::MetricRangeForm(text.to_owned());
    let (name, range) = text.split_once('=').ok_or_else(bad)?;
    let parts: Vec<&str> = range.split(':').map(str::trim).collect();
    let (min, max, higher) = match parts.as_slice() {
        [min, max] => (*min, *max, true),
        [min, max, "lower"] => (*min, *max, false),
        [min, max, "higher"] => (*min, *max, true),
        _ => return Err(bad()),
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(bad());
    }
    let (min, max) = (min.parse().map_err(|_| bad())?, max.parse().map_err(|_| bad())?);
    let range = MetricRange::new(min, max, higher)
        .map_err(|reason| PlacementValueError::MetricRange { text: text.to_owned(), reason })?;
    Ok((name.to_owned(), range))
}

/// The settings from the merged flags: the built-in metric ranges with the
/// configured ones on top, the seed from the clock unless given.
pub fn settings(
    stickiness: f64,
    reschedule_after: Duration,
    agent_loss_grace: Duration,
    seed: Option<u64>,
    ranges: &[(String, MetricRange)],
) -> PlacementSettings {
    let mut metrics = PlacementSettings::default_metrics();
    metrics.extend(ranges.iter().cloned());
    PlacementSettings {
        stickiness,
        reschedule_after,
        agent_loss_grace,
        seed: seed.unwrap_or_else(super::clock_seed),
        metrics,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_range_flags_parse_and_name_their_errors() {
        let (name, r) = parse_metric_range("free_memory_mb=0:8192").unwrap();
        assert_eq!(
            (name.as_str(), r),
            ("free_memory_mb", MetricRange { min: 0.0, max: 8192.0, higher_is_better: true })
        );
        assert!(!parse_metric_range("cpu_usage=0:100:lower").unwrap().1.higher_is_better);
        let e = parse_metric_range("x=5:1").unwrap_err().to_string();
        assert!(e.contains("min < max"), "{e}");
        assert!(parse_metric_range("x=0:1:best").unwrap_err().to_string().contains("NAME=MIN:MAX"));
        assert!(parse_metric_range("=0:1").is_err());
        assert!(parse_stickiness("-1").is_err() && parse_stickiness("0.25") == Ok(0.25));
        assert!(parse_interval("500ms").is_err() && parse_interval("2m") == Ok(Duration::from_secs(120)));
    }

    #[test]
    fn configured_ranges_replace_built_ins_by_name() {
        let ranges = [("free_memory_mb".to_owned(), MetricRange::new(0.0, 8192.0, true).unwrap())];
        let s = settings(0.2, Duration::from_secs(10), Duration::from_secs(20), Some(7), &ranges);
        assert_eq!(s.metrics["free_memory_mb"].max, 8192.0);
        assert_eq!(s.metrics["cpu_usage"].max, 100.0, "the other built-in stays");
        assert_eq!((s.stickiness, s.seed), (0.2, 7));
    }
}
