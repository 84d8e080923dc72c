//! [`ResourceMonitor`]: the agent's CPU usage (from `/proc/stat` deltas
//! between two samples) and free memory (`MemFree` of `/proc/meminfo`, as
//! Ankaios reports it through sysinfo's `free_memory`: not `MemAvailable`,
//! which also counts reclaimable caches), read directly, sent as
//! `AgentLoadStatus` by the server link.

use ank_common::AgentStatus;

/// Cumulative CPU times of the `cpu` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
pub fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    if values.len() < 4 {
        return None;
    }
    let total: u64 = values.iter().sum();
    // idle + iowait are not busy.
    let idle = values[3] + values.get(4).copied().unwrap_or(0);
    Some(CpuTimes { busy: total.saturating_sub(idle), total })
}

/// `MemFree` of `/proc/meminfo` in bytes (the kernel's "kB" are KiB).
pub fn parse_mem_free(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemFree:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU usage in percent between two samples.
pub fn cpu_percent(before: CpuTimes, after: CpuTimes) -> u32 {
    let total = after.total.saturating_sub(before.total);
    if total == 0 {
        return 0;
    }
    let busy = after.busy.saturating_sub(before.busy);
    u32::try_from((busy * 100 + total / 2) / total).unwrap_or(100).min(100)
}

/// Samples the host's load; remembers the last CPU sample for the delta.
#[derive(Debug, Default)]
pub struct ResourceMonitor {
    last: Option<CpuTimes>,
}

impl ResourceMonitor {
    /// Takes a sample; the first one reports 0 % CPU.
    pub fn sample(&mut self) -> AgentStatus {
        let now = std::fs::read_to_string("/proc/stat").ok().as_deref().and_then(parse_cpu_times);
        let cpu_usage = match (self.last, now) {
            (Some(before), Some(after)) => cpu_percent(before, after),
            _ => 0,
        };
        if now.is_some() {
            self.last = now;
        }
        let free_memory =
            std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(parse_mem_free).unwrap_or(0);
        AgentStatus { cpu_usage, free_memory }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_monitor_parses_proc_stat_and_meminfo() {
        let a = parse_cpu_times("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(a, CpuTimes { busy: 200, total: 1000 });
        let b = parse_cpu_times("cpu  150 0 150 800 100 0 0 0 0 0\n").unwrap();
        assert_eq!(cpu_percent(a, b), 50);
        assert_eq!(cpu_percent(a, a), 0);
        assert_eq!(parse_cpu_times("garbage"), None);
        // Ankaios' freeMemory is MemFree, not the larger MemAvailable.
        let meminfo = "MemTotal: 16384 kB\nMemFree:    2048 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(parse_mem_free(meminfo), Some(2 * 1024 * 1024));
        assert_eq!(parse_mem_free("MemTotal: 10 kB\nMemAvailable: 5 kB\n"), None);
    }

    #[test]
    fn resource_monitor_samples_this_host() {
        let mut m = ResourceMonitor::default();
        let first = m.sample();
        assert_eq!(first.cpu_usage, 0);
        assert!(first.free_memory > 0);
        // MemFree of this host, which never exceeds MemAvailable.
        let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
        let field = |name: &str| -> u64 {
            let line = meminfo.lines().find(|l| l.starts_with(name)).expect(name);
            line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect(name)
        };
        assert!(first.free_memory <= field("MemAvailable:") * 1024, "{} is not MemFree", first.free_memory);
        assert!(m.sample().cpu_usage <= 100);
    }
}
