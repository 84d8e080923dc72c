//! `generalOptions`: nerdctl's global options, vetted against the agent's
//! own containerd connection.
//!
//! The rule: a workload runs on the agent's containerd, in the agent's
//! namespace, with the agent's snapshotter. `--namespace/-n`, `--address/-a/-H`
//! and `--snapshotter/--storage-driver` are accepted only when they name
//! what the agent uses (the address with or without `unix://`), and refused
//! otherwise. `--debug`, `--debug-full`, `--cni-path`, `--cni-netconfpath`,
//! `--data-root`, `--cgroup-manager`, `--insecure-registry`, `--hosts-dir`,
//! `--experimental` and `--host-gateway-ip` change nothing here: they are
//! accepted and ignored, each with a warning the caller logs. Any other
//! word is refused.

use super::RunOptionsError;
use super::scan::{Flag, Item, ScanError, scan};

/// The global options this agent takes, for the message refusing another.
pub(super) const SUPPORTED: &str = "--namespace/-n, --address/-a, --snapshotter (each only with the agent's \
     value), --debug, --debug-full, --cni-path, --cni-netconfpath, --data-root, --cgroup-manager, \
     --insecure-registry, --hosts-dir, --experimental, --host-gateway-ip (ignored)";

/// The containerd the agent drives: what a workload may name but not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentContainerd<'a> {
    /// The containerd namespace of the agent's containers.
    pub namespace: &'a str,
    /// containerd's socket (`/run/containerd/containerd.sock`).
    pub address: &'a str,
    /// The snapshotter containers are prepared with (`overlayfs`).
    pub snapshotter: &'a str,
}

const fn flag(long: &'static str, aliases: &'static [&'static str], short: Option<char>, value: bool) -> Flag {
    Flag { long, aliases, short, takes_value: value }
}

static GLOBAL_FLAGS: &[Flag] = &[
    flag("namespace", &[], Some('n'), true),
    flag("address", &["host"], Some('a'), true),
    flag("snapshotter", &["storage-driver"], None, true),
    flag("debug", &[], None, false),
    flag("debug-full", &[], None, false),
    flag("cni-path", &[], None, true),
    flag("cni-netconfpath", &[], None, true),
    flag("data-root", &[], None, true),
    flag("cgroup-manager", &[], None, true),
    flag("insecure-registry", &[], None, false),
    flag("hosts-dir", &[], None, true),
    flag("experimental", &[], None, false),
    flag("host-gateway-ip", &[], None, true),
];

/// Checks a workload's `generalOptions` against the agent's containerd;
/// the warnings (one per ignored option) are for the caller to log.
pub fn check_general_options(options: &[String], agent: AgentContainerd<'_>) -> Result<Vec<String>, RunOptionsError> {
    let items = scan(options, GLOBAL_FLAGS).map_err(|e| match e {
        ScanError::Unknown(option) | ScanError::MissingValue(option) | ScanError::NotABool { option, .. } => {
            RunOptionsError::UnsupportedGeneral { option }
        }
    })?;
    let mut warnings = Vec::new();
    for item in items {
        let (long, spelled, value) = match item {
            Item::Opt { long, spelled, value } => (long, spelled, value),
            Item::Word(word) => return Err(RunOptionsError::UnsupportedGeneral { option: word }),
        };
        let agents = match long {
            "namespace" => agent.namespace,
            "address" => agent.address,
            "snapshotter" => agent.snapshotter,
            _ => {
                warnings.push(format!("generalOptions '{spelled}' of a containerd workload is ignored"));
                continue;
            }
        };
        let unix = |a: &str| a.strip_prefix("unix://").unwrap_or(a).to_owned();
        if unix(&value) != unix(agents) {
            return Err(RunOptionsError::ConflictingGeneral { option: spelled, value, agent: agents.to_owned() });
        }
    }
    Ok(warnings)
}
