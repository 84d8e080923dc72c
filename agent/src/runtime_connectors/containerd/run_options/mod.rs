//! The containerd `runtimeConfig` (Ankaios' shape) and the documented subset
//! of `nerdctl run` options it may carry in `commandOptions`.
//!
//! [`ContainerdRuntimeConfig::parse`] reads the YAML text (`image`,
//! `commandOptions`, `commandArgs`, `generalOptions`; camelCase keys with
//! snake_case aliases; unknown keys ignored). [`RunOptions::parse`] turns
//! `commandOptions` into typed options; [`check_general_options`] vets
//! `generalOptions`. Anything this agent cannot honour is refused with a
//! [`RunOptionsError`] that names the option: a container silently started
//! without a requested mount or limit is worse than no container.
//!
//! Supported `commandOptions` (both `--opt value` and `--opt=value`):
//! `-e/--env KEY=VALUE|KEY`, `--env-file FILE`, `-v/--volume
//! /SRC:/DST[:ro|rw]`, `--mount type=bind,source=/SRC,destination=/DST[,readonly]`,
//! `-u/--user`, `--entrypoint`, `-w/--workdir`, `-l/--label k=v`,
//! `--net/--network host|none|bridge`, `-p/--publish [ip:]HOST:CONTAINER[/tcp|udp]`,
//! `-m/--memory`, `--cpus`, `--read-only`, `--privileged`, `--cap-add`,
//! `--cap-drop`, `--restart=no`, `--name`, `-h/--hostname`. Accepted and
//! ignored: `--rm` (the agent removes its containers itself), `-d/--detach`
//! (containers always run detached), `-i/--interactive` and `-t/--tty` (no
//! terminal is ever attached). Refused: named and anonymous volumes (only
//! host paths can be bound), port ranges, any `--restart` but `no` (the
//! agent's restart policy restarts workloads), and every other option.

mod general;
mod parse;
mod scan;
#[cfg(test)]
mod tests;

use crate::runtime_connectors::runtime_config::RuntimeConfigError;
use serde::Deserialize;

use crate::runtime_connectors::RuntimeError;

pub use general::{AgentContainerd, check_general_options};

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

/// The `runtimeConfig` of a containerd workload, as Ankaios accepts it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
// Unknown keys are ignored, as Ankaios ignores them.
#[serde(rename_all = "camelCase")]
pub struct ContainerdRuntimeConfig {
    /// nerdctl's global options (see [`check_general_options`]).
    #[serde(default, alias = "general_options")]
    pub general_options: Vec<String>,
    /// `nerdctl run` options (see [`RunOptions`]).
    #[serde(default, alias = "command_options")]
    pub command_options: Vec<String>,
    /// The image reference; required and not empty.
    pub image: String,
    /// The command: replaces the image's `Cmd` when not empty.
    #[serde(default, alias = "command_args")]
    pub command_args: Vec<String>,
}

/// The runtime name in messages about a runtimeConfig.
const RUNTIME: &str = "containerd";

impl ContainerdRuntimeConfig {
    /// Parses a workload's runtimeConfig; the error names the problem.
    pub fn parse(text: &str) -> Result<Self, RuntimeConfigError> {
        let config: Self = serde_saphyr::from_str(text).map_err(|e| RuntimeConfigError::Unreadable {
            runtime: RUNTIME,
            reason: e.to_string().lines().next().unwrap_or("").to_owned(),
        })?;
        if config.image.trim().is_empty() {
            return Err(RuntimeConfigError::Empty { runtime: RUNTIME, field: "image" });
        }
        Ok(config)
    }

    /// The typed `commandOptions`, with `-e KEY` taken from the agent's
    /// environment.
    pub fn run_options(&self) -> Result<RunOptions, RunOptionsError> {
        RunOptions::parse(&self.command_options)
    }
}

/// The typed `commandOptions` of a containerd workload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunOptions {
    /// `KEY=VALUE` from `--env-file`s, then from `-e`s, in their order
    /// (docker's order: a later one wins by key).
    pub env: Vec<String>,
    /// `-v` and `--mount type=bind` mounts, in their order.
    pub binds: Vec<BindMount>,
    /// `-u`: `uid`, `uid:gid`, `name` or `name:group`.
    pub user: Option<String>,
    /// `--entrypoint` (`Some("")`: none; either way the image's `Cmd` is
    /// dropped, as docker does).
    pub entrypoint: Option<String>,
    /// `-w`.
    pub workdir: Option<String>,
    /// `-l`, in their order.
    pub labels: Vec<(String, String)>,
    /// `--net`.
    pub network: NetworkMode,
    /// `-p`.
    pub ports: Vec<PortMapping>,
    /// `-m/--memory`, in bytes.
    pub memory: Option<u64>,
    /// `--cpus`.
    pub cpus: Option<f64>,
    /// `--read-only`.
    pub read_only: bool,
    /// `--privileged`.
    pub privileged: bool,
    /// `--cap-add`: `CAP_*` names or `ALL`.
    pub cap_add: Vec<String>,
    /// `--cap-drop`: `CAP_*` names or `ALL`.
    pub cap_drop: Vec<String>,
    /// `--name`: the container id the user chose.
    pub name: Option<String>,
    /// `-h/--hostname`.
    pub hostname: Option<String>,
}

/// Why `commandOptions` or `generalOptions` cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunOptionsError {
    /// An option outside the supported subset.
    #[error(
        "unsupported nerdctl run option '{option}' in commandOptions of a containerd workload (supported: {})",
        parse::SUPPORTED
    )]
    Unsupported { option: String },
    /// A word that is no option (the image and command have keys of their own).
    #[error(
        "unexpected word '{word}' in commandOptions of a containerd workload: only options go there (the image goes in 'image', the command in 'commandArgs')"
    )]
    StrayWord { word: String },
    /// An option that needs a value came last.
    #[error("option '{option}' in commandOptions of a containerd workload needs a value")]
    MissingValue { option: String },
    /// An option's value does not read.
    #[error("invalid value '{value}' of option '{option}' of a containerd workload: {reason}")]
    InvalidValue { option: String, value: String, reason: String },
    /// A volume that is no host path.
    #[error(
        "volume '{value}' of a containerd workload is not supported: only bind mounts of absolute host paths (/SRC:/DST[:ro|rw]) are, no named or anonymous volumes"
    )]
    NotABind { value: String },
    /// An `--env-file` that cannot be read.
    #[error("--env-file '{path}' of a containerd workload: {reason}")]
    EnvFile { path: String, reason: String },
    /// A restart policy other than `no`.
    #[error(
        "--restart={value} of a containerd workload is not supported: only 'no' is, the agent restarts workloads by their restartPolicy"
    )]
    Restart { value: String },
    /// A global option this agent does not take.
    #[error(
        "unsupported nerdctl global option '{option}' in generalOptions of a containerd workload (supported: {})",
        general::SUPPORTED
    )]
    UnsupportedGeneral { option: String },
    /// A global option that would need another containerd than the agent's.
    #[error(
        "generalOptions of a containerd workload set {option} '{value}', but this agent uses '{agent}': a workload cannot choose its own"
    )]
    ConflictingGeneral { option: String, value: String, agent: String },
}

impl From<RunOptionsError> for RuntimeError {
    fn from(error: RunOptionsError) -> Self {
        // A configuration that will never run as it is: no retry helps.
        RuntimeError::InvalidConfig(error.to_string())
    }
}

/// The memory a containerd workload declares: its `-m/--memory` in bytes,
/// 0 when none.
// [feature K2: how a workload declares its memory]
pub fn declared_memory(runtime_config: &str) -> Result<u64, RuntimeError> {
    let config = ContainerdRuntimeConfig::parse(runtime_config)?;
    Ok(parse::memory_option(&config.command_options)?.unwrap_or(0))
}
