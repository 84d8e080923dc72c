//! Networking of containerd containers: the CNI bridge network and its
//! published ports ([`Cni`]), and a container's `/etc/hosts`,
//! `/etc/resolv.conf` and `/etc/hostname` ([`EtcFiles`]).
//!
//! How the connector uses it, per [`NetworkMode`](super::run_options::NetworkMode):
//! - `Bridge`: the spec asks runc for a new network namespace; after
//!   `Tasks.Create` (process created, not started) the connector calls
//!   [`Cni::add`] with `/proc/<pid>/ns/net`, then `Tasks.Start`; after the
//!   task died, [`Cni::del`] (works after an agent restart: what DEL needs
//!   is kept in the state folder; idempotent).
//! - `None`: a new network namespace and nothing else: runc (1.1, checked
//!   with `runc run` of `ip addr show lo`) brings the namespace's `lo` up
//!   itself, as for every new network namespace it creates, so no CNI call
//!   is needed.
//! - `Host`: no network namespace of its own, no CNI call.
//!
//! Published ports (portmap, with its default `snat`) answer on the host's
//! addresses from the host itself (OUTPUT DNAT), from other hosts and
//! from other containers on the bridge (PREROUTING DNAT, hairpin), and on
//! 127.0.0.1: portmap sets `route_localnet=1` on the bridge and
//! masquerades the localhost-sourced connections itself, nothing to do
//! here. The real tests check all four (another host: a namespace on a
//! veth link of its own to the host).
//!
//! nerdctl's list also has `tuning`, which does nothing without sysctls
//! to set: left out.
//!
//! The bridge network defaults to nerdctl's (network `bridge` on the Linux
//! bridge `nerdctl0`, 10.4.0.0/24), so containers of both share one address
//! pool (host-local IPAM locks its store) and podman's 10.88.0.0/16 is left
//! alone.

mod cni;
mod etc_files;
mod masquerade;
mod plugin;
pub mod shared_rules;
mod state;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

pub use cni::{Attachment, BridgeNetwork, Cni, REQUIRED_PLUGINS};
pub use etc_files::{EtcFiles, EtcFilesWriter, EtcRequest};

/// What went wrong while networking a container.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error(
        "publishing ports and the default bridge network need the CNI plugins {} in {} \
         (Debian: apt install containernetworking-plugins); missing: {}; \
         use --net=host or --net=none otherwise",
        REQUIRED_PLUGINS.join(", "),
        dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(" or "),
        missing.join(", ")
    )]
    MissingPlugins { missing: Vec<String>, dirs: Vec<PathBuf> },
    #[error("invalid network configuration: {0}")]
    InvalidConfig(String),
    #[error("invalid container id {0:?} for CNI (letters, digits, '_', '.', '-')")]
    InvalidContainerId(String),
    #[error("CNI plugin {plugin} ({command}) could not be started: {source}")]
    Spawn { plugin: String, command: &'static str, source: std::io::Error },
    #[error("CNI plugin {plugin} ({command}) did not finish within {after:?}")]
    Timeout { plugin: String, command: &'static str, after: Duration },
    #[error("CNI plugin {plugin} ({command}) failed{}: {msg}{}",
        code.map(|c| format!(" with code {c}")).unwrap_or_default(),
        if details.is_empty() { String::new() } else { format!(" ({details})") })]
    Plugin { plugin: String, command: &'static str, code: Option<u64>, msg: String, details: String },
    #[error("CNI plugin {plugin} ({command}) returned an unusable result: {reason}")]
    BadResult { plugin: String, command: &'static str, reason: String },
    #[error("CNI network state {path}: {reason}")]
    State { path: PathBuf, reason: String },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error("invalid hostname {0:?} (letters, digits, '-', '.'; at most 253)")]
    InvalidHostname(String),
}

/// An IPv4 subnet (`10.4.0.0/24`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    pub addr: Ipv4Addr,
    pub prefix: u8,
}

impl Subnet {
    /// The subnet's first host address: the bridge's (gateway's) address.
    pub fn first_host(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network()).saturating_add(1))
    }

    /// The network address (host bits cleared).
    pub fn network(&self) -> Ipv4Addr {
        let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
        Ipv4Addr::from(u32::from(self.addr) & mask)
    }

    /// Whether `ip` is inside the subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let other = Subnet { addr: ip, prefix: self.prefix };
        other.network() == self.network()
    }
}

impl FromStr for Subnet {
    type Err = NetworkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || NetworkError::InvalidConfig(format!("subnet {s:?} is not an IPv4 a.b.c.d/n"));
        let (addr, prefix) = s.split_once('/').ok_or_else(bad)?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&prefix) {
            return Err(NetworkError::InvalidConfig(format!("subnet {s:?}: prefix length must be 8 to 30")));
        }
        Ok(Subnet { addr, prefix })
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}
