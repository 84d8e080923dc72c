//! The metrics an agent advertises for placement: the built-ins derived
//! from its load status (`cpu_usage` in percent, `free_memory_mb` in MiB)
//! and the static ones its operator declares. [`Metrics`] keeps finite
//! values only, so it compares like any other value of the complete state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::agent_status::AgentStatus;

/// Name of the built-in CPU metric (percent, 0..100).
pub const CPU_USAGE: &str = "cpu_usage";
/// Name of the built-in free-memory metric (MiB).
pub const FREE_MEMORY_MB: &str = "free_memory_mb";

/// Metric name -> value; non-finite values are never stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metrics(BTreeMap<String, f64>);

// Only finite values are stored, so equality is reflexive.
impl Eq for Metrics {}

impl Metrics {
    /// The finite values of `values`; NaN and infinities are dropped.
    pub fn new(values: impl IntoIterator<Item = (String, f64)>) -> Self {
        Self(values.into_iter().filter(|(_, v)| v.is_finite()).collect())
    }

    /// The operator's `extra` metrics with the built-ins of `status` on top
    /// (a built-in name in `extra` is replaced by the measured value).
    // [feature S1: agents advertise cpu_usage and free_memory_mb]
    pub fn from_load(status: &AgentStatus, extra: &BTreeMap<String, f64>) -> Self {
        let mut m = Self::new(extra.iter().map(|(k, v)| (k.clone(), *v)));
        m.0.insert(CPU_USAGE.to_owned(), f64::from(status.cpu_usage));
        // Whole MiB are enough to place by and compare without noise.
        m.0.insert(FREE_MEMORY_MB.to_owned(), (status.free_memory / (1024 * 1024)) as f64);
        m
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.get(name).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The values by name.
    pub fn as_map(&self) -> &BTreeMap<String, f64> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature S1: built-in metrics from the load status]
    #[test]
    fn built_ins_come_from_the_load_status_and_win_over_extras() {
        let status = AgentStatus { cpu_usage: 37, free_memory: 4096 * 1024 * 1024 + 5 };
        let extra = BTreeMap::from([("speed".to_owned(), 2.5), ("cpu_usage".to_owned(), 99.0)]);
        let m = Metrics::from_load(&status, &extra);
        assert_eq!(m.get(CPU_USAGE), Some(37.0));
        assert_eq!(m.get(FREE_MEMORY_MB), Some(4096.0));
        assert_eq!(m.get("speed"), Some(2.5));
        assert_eq!(serde_json::to_value(&m).unwrap()["speed"], 2.5);
        let odd = Metrics::new([("nan".to_owned(), f64::NAN), ("inf".to_owned(), f64::INFINITY)]);
        assert!(odd.is_empty(), "non-finite values are dropped");
    }
}
