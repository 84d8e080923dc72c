//! [`EtcFilesWriter`]: a container's `/etc/hosts`, `/etc/resolv.conf` and
//! `/etc/hostname`, written into a folder of its own for the spec builder
//! to bind-mount, as nerdctl and docker make them:
//! - `resolv.conf`: the host's; in a network namespace of its own a
//!   loopback nameserver (systemd-resolved's 127.0.0.53) cannot be
//!   reached, so systemd-resolved's upstream list
//!   (`/run/systemd/resolve/resolv.conf`) is taken instead when the host's
//!   has one, loopback and IPv6 nameservers (the bridge network is
//!   IPv4 only) are dropped, and when none is left the fallback
//!   nameservers (docker's and nerdctl's 8.8.8.8 and 8.8.4.4) are used.
//! - `hosts`: the localhost lines, `<ip> <hostname>` on the bridge network.
//! - `hostname`: the hostname.
//!
//! In host mode the container shares the host's network namespace, so it
//! gets *copies* of the host's `resolv.conf` (loopback nameservers work
//! there) and `hosts`: not the host's files themselves, which a container
//! with a writable mount could change for the whole host, and whose bind
//! mount would be as stale as a copy once the host's tools replace them
//! (they rename a new file over the old).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use super::NetworkError;
use crate::runtime_connectors::containerd::run_options::NetworkMode;

/// Where a container's files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcFiles {
    pub hosts: PathBuf,
    pub resolv_conf: PathBuf,
    pub hostname: PathBuf,
}

/// What a container's files say.
#[derive(Debug, Clone)]
pub struct EtcRequest<'a> {
    pub mode: NetworkMode,
    pub hostname: &'a str,
    /// The container's address on the bridge network.
    pub ip: Option<IpAddr>,
    /// Further `/etc/hosts` entries (`--add-host name:ip`).
    pub extra_hosts: &'a [(String, IpAddr)],
}

/// Writes containers' files from the host's.
#[derive(Debug, Clone)]
pub struct EtcFilesWriter {
    /// The host's `/etc/resolv.conf`.
    pub host_resolv_conf: PathBuf,
    /// systemd-resolved's list of upstream nameservers.
    pub resolved_upstream: PathBuf,
    /// The host's `/etc/hosts`.
    pub host_hosts: PathBuf,
    /// The nameservers of a container that has none left.
    pub fallback_nameservers: Vec<IpAddr>,
}

impl Default for EtcFilesWriter {
    fn default() -> Self {
        EtcFilesWriter {
            host_resolv_conf: "/etc/resolv.conf".into(),
            resolved_upstream: "/run/systemd/resolve/resolv.conf".into(),
            host_hosts: "/etc/hosts".into(),
            fallback_nameservers: vec![IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)), IpAddr::V4(Ipv4Addr::new(8, 8, 4, 4))],
        }
    }
}

impl EtcFilesWriter {
    /// Writes `hosts`, `resolv.conf` and `hostname` into `dir` (created
    /// if need be) and returns their paths.
    pub async fn write(&self, dir: &Path, req: &EtcRequest<'_>) -> Result<EtcFiles, NetworkError> {
        validate_hostname(req.hostname)?;
        for (name, _) in req.extra_hosts {
            validate_hostname(name)?;
        }
        let host_resolv = read_or_empty(&self.host_resolv_conf).await?;
        let resolv = if req.mode == NetworkMode::Host {
            host_resolv
        } else {
            let upstream = if has_loopback_nameserver(&host_resolv) {
                Some(read_or_empty(&self.resolved_upstream).await?).filter(|u| !u.is_empty())
            } else {
                None
            };
            namespaced_resolv_conf(upstream.as_deref().unwrap_or(&host_resolv), &self.fallback_nameservers)
        };
        let hosts = match req.mode {
            NetworkMode::Host => {
                let mut hosts = read_or_empty(&self.host_hosts).await?;
                if !hosts.is_empty() && !hosts.ends_with('\n') {
                    hosts.push('\n');
                }
                hosts + &hosts_entries(req.extra_hosts)
            }
            NetworkMode::Bridge | NetworkMode::None => namespaced_hosts(req.hostname, req.ip, req.extra_hosts),
        };
        let files =
            EtcFiles { hosts: dir.join("hosts"), resolv_conf: dir.join("resolv.conf"), hostname: dir.join("hostname") };
        tokio::fs::create_dir_all(dir).await.map_err(io("creating", dir))?;
        for (path, text) in
            [(&files.hosts, hosts), (&files.resolv_conf, resolv), (&files.hostname, format!("{}\n", req.hostname))]
        {
            tokio::fs::write(path, text).await.map_err(io("writing", path))?;
        }
        Ok(files)
    }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> NetworkError {
    let path = path.to_path_buf();
    move |source| NetworkError::Io { what, path, source }
}

/// The file's text; empty when it does not exist.
async fn read_or_empty(path: &Path) -> Result<String, NetworkError> {
    match tokio::fs::read_to_string(path).await {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io("reading", path)(e)),
    }
}

/// The address of a `nameserver` line.
fn nameserver(line: &str) -> Option<Option<IpAddr>> {
    let mut words = line.split_whitespace();
    (words.next() == Some("nameserver")).then(|| words.next().and_then(|a| a.parse().ok()))
}

fn has_loopback_nameserver(resolv: &str) -> bool {
    resolv.lines().filter_map(nameserver).any(|ip| ip.is_some_and(|ip| ip.is_loopback()))
}

/// `resolv` for a container in a network namespace of its own: without
/// loopback and IPv6 nameservers, with `fallback` when none is left.
pub(super) fn namespaced_resolv_conf(resolv: &str, fallback: &[IpAddr]) -> String {
    let mut out = String::new();
    let mut kept = 0;
    for line in resolv.lines() {
        match nameserver(line) {
            Some(Some(ip)) if ip.is_loopback() || ip.is_ipv6() => continue,
            Some(None) => continue,
            Some(Some(_)) => kept += 1,
            None => {}
        }
        out.push_str(line);
        out.push('\n');
    }
    if kept == 0 {
        for ip in fallback {
            let _ = writeln!(out, "nameserver {ip}");
        }
    }
    out
}

/// `hosts` of a container in a network namespace of its own.
pub(super) fn namespaced_hosts(hostname: &str, ip: Option<IpAddr>, extra: &[(String, IpAddr)]) -> String {
    let mut out = String::from(
        "127.0.0.1\tlocalhost localhost.localdomain\n\
         ::1\tlocalhost localhost.localdomain ip6-localhost ip6-loopback\n",
    );
    if let Some(ip) = ip {
        let _ = write!(out, "{ip}\t{hostname}");
        if let Some((short, _)) = hostname.split_once('.') {
            let _ = write!(out, " {short}");
        }
        out.push('\n');
    }
    out + &hosts_entries(extra)
}

fn hosts_entries(extra: &[(String, IpAddr)]) -> String {
    extra.iter().fold(String::new(), |mut out, (name, ip)| {
        let _ = writeln!(out, "{ip}\t{name}");
        out
    })
}

/// RFC 1123 host names: dot-separated labels of letters, digits and
/// inner `-`, at most 253 characters.
fn validate_hostname(name: &str) -> Result<(), NetworkError> {
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if (1..=253).contains(&name.len()) && name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(NetworkError::InvalidHostname(name.to_string()))
    }
}

#[cfg(test)]
#[path = "etc_files_tests.rs"]
mod tests;
