//! The containerd `runtimeConfig` (Ankaios' shape) and the documented subset
//! of `nerdctl run` options it may carry in `commandOptions`.

use std::net::IpAddr;

/// How a container is networked (`--net`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetworkMode {
    /// nerdctl's default: a network namespace of its own on the CNI bridge.
    #[default]
    Bridge,
    /// The host's network namespace.
    Host,
    /// A network namespace of its own with only loopback.
    None,
}

/// A port's protocol (`-p 8080:80/udp`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

/// One `-p/--publish` mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMapping {
    /// The host address to bind (`None`: all).
    pub host_ip: Option<IpAddr>,
    pub host_port: u16,
    pub container_port: u16,
    pub protocol: Protocol,
}

/// One bind mount (`-v`, `--mount type=bind`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    pub source: String,
    pub destination: String,
    pub read_only: bool,
}
