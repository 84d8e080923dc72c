//! The server process' costs from `/proc/<pid>`: CPU seconds (utime +
//! stime of `stat`) and memory (VmRSS, VmHWM of `status`).

use crate::error::{Result, ScaleError};

/// Clock ticks per second of `/proc/<pid>/stat` (USER_HZ, 100 on every
/// Linux architecture the kernel exports it for).
const USER_HZ: f64 = 100.0;

/// CPU seconds the process used so far, user and system.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).map_err(|source| ScaleError::Proc { pid, file: "stat", source })?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let after_name = text.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let mut fields = after_name.split_whitespace();
    // Fields 3.. follow the name; utime is field 14, stime 15.
    let utime = tick_field(fields.nth(11), pid, "utime")?;
    let stime = tick_field(fields.next(), pid, "stime")?;
    Ok((utime + stime) as f64 / USER_HZ)
}

fn tick_field(field: Option<&str>, pid: u32, name: &'static str) -> Result<u64> {
    field.and_then(|f| f.parse().ok()).ok_or(ScaleError::ProcFormat { pid, file: "stat", field: name })
}

/// Resident and peak resident memory of a process, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
}

/// The process' VmRSS and VmHWM now.
pub fn memory(pid: u32) -> Result<Memory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|source| ScaleError::Proc {
        pid,
        file: "status",
        source,
    })?;
    let kib = |key: &'static str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or(ScaleError::ProcFormat { pid, file: "status", field: key })
    };
    Ok(Memory { rss_kib: kib("VmRSS:")?, hwm_kib: kib("VmHWM:")? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn procstat_reads_own_process() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).expect("cpu") >= 0.0);
        let m = memory(pid).expect("memory");
        assert!(m.rss_kib > 0 && m.hwm_kib >= m.rss_kib);
    }
}
