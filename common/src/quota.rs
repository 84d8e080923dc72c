//! An agent's workload quota (feature K2): the limits it is configured with
//! ([`QuotaLimits`], sent in its hello), what its workloads use of them
//! ([`QuotaUsage`], sent with its load status), the two together as the
//! server shows them ([`AgentQuota`]), and memory sizes as users write them
//! (`512m`, `1g` as podman reads them; `256Mi`, `1Gi`, `500M` as
//! Kubernetes reads them).

use serde::{Deserialize, Serialize};

/// Bytes in a MiB.
pub const MIB: u64 = 1024 * 1024;

/// How many workloads and how much declared memory an agent may run at
/// once; 0 is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaLimits {
    #[serde(default)]
    pub max_workloads: u32,
    /// Bytes.
    #[serde(default)]
    pub max_memory: u64,
}

impl QuotaLimits {
    /// Whether any limit is set.
    pub fn is_limited(&self) -> bool {
        self.max_workloads > 0 || self.max_memory > 0
    }
}

/// What an agent's workloads in `Pending(Starting)` or `Running` use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaUsage {
    #[serde(default)]
    pub workloads: u32,
    /// Declared memory in bytes.
    #[serde(default)]
    pub memory: u64,
}

/// An agent's quota with its use, as the complete state lists it under
/// `agents.<name>.quota`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentQuota {
    #[serde(default)]
    pub max_workloads: u32,
    #[serde(default)]
    pub max_memory: u64,
    #[serde(default)]
    pub used_workloads: u32,
    #[serde(default)]
    pub used_memory: u64,
}

impl AgentQuota {
    /// The quota of an agent with `limits`, nothing used yet; `None` when
    /// the agent has no limits.
    pub fn of(limits: QuotaLimits) -> Option<Self> {
        limits.is_limited().then_some(Self {
            max_workloads: limits.max_workloads,
            max_memory: limits.max_memory,
            ..Self::default()
        })
    }

    /// `3/4` for the count, `1536/2048MiB` for memory, both separated by
    /// a space when both are limited (used workloads alone when only the
    /// memory is limited: `3 1536/2048MiB`).
    pub fn summary(&self) -> String {
        let count = match self.max_workloads {
            0 => self.used_workloads.to_string(),
            max => format!("{}/{max}", self.used_workloads),
        };
        if self.max_memory == 0 {
            return count;
        }
        format!("{count} {}/{}MiB", mib_ceil(self.used_memory), mib_ceil(self.max_memory))
    }
}

/// Bytes in whole MiB, rounded up.
pub fn mib_ceil(bytes: u64) -> u64 {
    bytes.div_ceil(MIB)
}

/// The unit convention a size is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeUnits {
    /// podman's `--memory`: a number with an optional `b`, `k`, `m` or `g`
    /// (any case; powers of 1024), e.g. `512m`, `1g`; also the binary
    /// Kubernetes suffixes (`256Mi`).
    Podman,
    /// Kubernetes quantities: `Ki`, `Mi`, `Gi`, `Ti` (powers of 1024),
    /// `k`, `M`, `G`, `T` (powers of 1000), a bare number of bytes.
    Kube,
}

/// A memory size that is none in the units asked for; names the text and
/// the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadMemory {
    #[error("memory '{0}' is not a size like 512m, 1g or 256Mi")]
    Podman(String),
    #[error("memory '{0}' is not a Kubernetes quantity like 256Mi, 1Gi or 500M")]
    Kube(String),
}

/// For callers that still report errors as text.
impl From<BadMemory> for String {
    fn from(e: BadMemory) -> Self {
        e.to_string()
    }
}

/// Parses a memory size into bytes; the error names the text and the
/// accepted forms.
pub fn parse_memory(text: &str, units: SizeUnits) -> Result<u64, BadMemory> {
    let s = text.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let bad = || match units {
        SizeUnits::Podman => BadMemory::Podman(text.to_owned()),
        SizeUnits::Kube => BadMemory::Kube(text.to_owned()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    let factor: u64 = match (units, suffix) {
        (_, "") => 1,
        (_, "Ki") => 1 << 10,
        (_, "Mi") => 1 << 20,
        (_, "Gi") => 1 << 30,
        (_, "Ti") => 1 << 40,
        (SizeUnits::Podman, "b" | "B") => 1,
        (SizeUnits::Podman, "k" | "K" | "kb" | "KB") => 1 << 10,
        (SizeUnits::Podman, "m" | "M" | "mb" | "MB") => 1 << 20,
        (SizeUnits::Podman, "g" | "G" | "gb" | "GB") => 1 << 30,
        (SizeUnits::Kube, "k" | "K") => 1_000,
        (SizeUnits::Kube, "M") => 1_000_000,
        (SizeUnits::Kube, "G") => 1_000_000_000,
        (SizeUnits::Kube, "T") => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let bytes = (value * factor as f64).ceil();
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    // Checked above: finite, not negative, in range.
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // [test of feature K2]
    fn quota_sizes_in_podman_and_kubernetes_units() {
        assert_eq!(parse_memory("512m", SizeUnits::Podman), Ok(512 * MIB));
        assert_eq!(parse_memory("1g", SizeUnits::Podman), Ok(1024 * MIB));
        assert_eq!(parse_memory("1G", SizeUnits::Podman), Ok(1024 * MIB));
        assert_eq!(parse_memory("256Mi", SizeUnits::Podman), Ok(256 * MIB));
        assert_eq!(parse_memory("2048", SizeUnits::Podman), Ok(2048));
        assert_eq!(parse_memory("64k", SizeUnits::Podman), Ok(64 * 1024));
        assert_eq!(parse_memory("1Gi", SizeUnits::Kube), Ok(1024 * MIB));
        assert_eq!(parse_memory("256Mi", SizeUnits::Kube), Ok(256 * MIB));
        assert_eq!(parse_memory("500M", SizeUnits::Kube), Ok(500_000_000));
        assert_eq!(parse_memory("1.5Gi", SizeUnits::Kube), Ok(1536 * MIB));
        assert!(parse_memory("512x", SizeUnits::Podman).unwrap_err().to_string().contains("'512x'"));
        assert!(parse_memory("", SizeUnits::Kube).is_err());
        assert!(parse_memory("1m", SizeUnits::Kube).unwrap_err().to_string().contains("Kubernetes quantity"));
        assert!(parse_memory("-1g", SizeUnits::Podman).is_err());
    }

    #[test]
    // [test of feature K2]
    fn quota_summary_shows_used_of_max() {
        let q = AgentQuota { max_workloads: 4, used_workloads: 3, ..Default::default() };
        assert_eq!(q.summary(), "3/4");
        let q = AgentQuota { max_memory: 2048 * MIB, used_memory: 1536 * MIB, used_workloads: 2, ..Default::default() };
        assert_eq!(q.summary(), "2 1536/2048MiB");
        assert_eq!(AgentQuota::of(QuotaLimits::default()), None);
        assert_eq!(AgentQuota::of(QuotaLimits { max_workloads: 2, max_memory: 0 }).unwrap().summary(), "0/2");
    }
}
