//! containerd 1.6's defaults for a Linux container (what its
//! `oci.GenerateSpec` starts from), written out from the runtime-spec
//! fields they fill.

use super::model::{DeviceRule, Mount, Rlimit};

/// The capabilities a container has unless told otherwise.
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Every Linux capability (up to Linux 5.9's CAP_CHECKPOINT_RESTORE), in
/// the kernel's order: what `ALL` and `--privileged` mean.
pub const ALL_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// The capabilities in this process's bounding set (`CapBnd` of
/// `/proc/self/status`; bit n is `ALL_CAPABILITIES[n]`): what `ALL` and
/// `--privileged` may grant, since runc cannot give a container a
/// capability the agent lacks. All known ones when the file does not read.
pub fn agent_capabilities() -> Vec<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let bounding =
        status.lines().find_map(|l| l.strip_prefix("CapBnd:")).and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok());
    match bounding {
        Some(mask) => capabilities_in(mask),
        None => ALL_CAPABILITIES.to_vec(),
    }
}

/// The capabilities whose bits are set in `mask`.
pub fn capabilities_in(mask: u64) -> Vec<&'static str> {
    ALL_CAPABILITIES.iter().enumerate().filter(|(bit, _)| mask >> bit & 1 == 1).map(|(_, cap)| *cap).collect()
}

/// `PATH` when the image sets none.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Paths hidden from the container (none when privileged).
pub const MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
    "/proc/scsi",
];

/// Paths the container sees read-only (none when privileged).
pub const READONLY_PATHS: &[&str] = &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"];

/// The soft and hard limit of open files.
pub fn rlimits() -> Vec<Rlimit> {
    vec![Rlimit { kind: "RLIMIT_NOFILE".into(), hard: 1024, soft: 1024 }]
}

fn mount(destination: &str, kind: &str, source: &str, options: &[&str]) -> Mount {
    Mount {
        destination: destination.into(),
        kind: kind.into(),
        source: source.into(),
        options: options.iter().map(|o| (*o).to_owned()).collect(),
    }
}

/// The kernel file systems of every container; `/sys` and its cgroup
/// file system writable only when privileged.
pub fn system_mounts(privileged: bool) -> Vec<Mount> {
    let sys = if privileged { "rw" } else { "ro" };
    vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"]),
        mount("/dev", "tmpfs", "tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"]),
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
        ),
        mount("/dev/shm", "tmpfs", "shm", &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]),
        mount("/dev/mqueue", "mqueue", "mqueue", &["nosuid", "noexec", "nodev"]),
        mount("/sys", "sysfs", "sysfs", &["nosuid", "noexec", "nodev", sys]),
        mount("/sys/fs/cgroup", "cgroup", "cgroup", &["nosuid", "noexec", "nodev", "relatime", sys]),
    ]
}

fn char_device(major: i64, minor: Option<i64>) -> DeviceRule {
    DeviceRule { allow: true, kind: Some("c".into()), major: Some(major), minor, access: "rwm".into() }
}

/// The device cgroup: deny all, then allow the usual character devices
/// (null, zero, full, random, urandom, tty, console, ptmx, pts/*, tun);
/// everything when privileged.
pub fn device_rules(privileged: bool) -> Vec<DeviceRule> {
    let mut rules = vec![DeviceRule { allow: privileged, kind: None, major: None, minor: None, access: "rwm".into() }];
    if !privileged {
        rules.extend([
            char_device(1, Some(3)),
            char_device(1, Some(5)),
            char_device(1, Some(7)),
            char_device(1, Some(8)),
            char_device(1, Some(9)),
            char_device(5, Some(0)),
            char_device(5, Some(1)),
            char_device(5, Some(2)),
            char_device(136, None),
            char_device(10, Some(200)),
        ]);
    }
    rules
}
