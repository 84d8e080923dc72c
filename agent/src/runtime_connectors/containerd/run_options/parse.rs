//! `commandOptions` → [`RunOptions`]: one small function per option.

use std::net::IpAddr;

use ank_common::quota::{SizeUnits, parse_memory};

use super::scan::{Flag, Item, ScanError, scan};
use super::{BindMount, NetworkMode, PortMapping, Protocol, RunOptions, RunOptionsError};
use crate::runtime_connectors::containerd::oci_spec::ALL_CAPABILITIES;

/// The supported options, for the message refusing another one.
pub(super) const SUPPORTED: &str = "-e/--env, --env-file, -v/--volume, --mount type=bind, -u/--user, --entrypoint, \
     -w/--workdir, -l/--label, --net/--network, -p/--publish, -m/--memory, --cpus, --read-only, --privileged, \
     --cap-add, --cap-drop, --restart=no, --name, -h/--hostname, --rm, -d/--detach, -i, -t";

const fn flag(long: &'static str, short: Option<char>, takes_value: bool) -> Flag {
    Flag { long, aliases: &[], short, takes_value }
}

/// The options of `nerdctl run` this agent honours.
static RUN_FLAGS: &[Flag] = &[
    flag("env", Some('e'), true),
    flag("env-file", None, true),
    flag("volume", Some('v'), true),
    flag("mount", None, true),
    flag("user", Some('u'), true),
    flag("entrypoint", None, true),
    flag("workdir", Some('w'), true),
    flag("label", Some('l'), true),
    Flag { long: "network", aliases: &["net"], short: None, takes_value: true },
    flag("publish", Some('p'), true),
    flag("memory", Some('m'), true),
    flag("cpus", None, true),
    flag("read-only", None, false),
    flag("privileged", None, false),
    flag("cap-add", None, true),
    flag("cap-drop", None, true),
    flag("restart", None, true),
    flag("name", None, true),
    flag("hostname", Some('h'), true),
    flag("rm", None, false),
    flag("detach", Some('d'), false),
    flag("interactive", Some('i'), false),
    flag("tty", Some('t'), false),
];

/// The scanned options, or the error naming the first bad word.
fn scan_run(options: &[String]) -> Result<Vec<Item>, RunOptionsError> {
    scan(options, RUN_FLAGS).map_err(|e| match e {
        ScanError::Unknown(option) => RunOptionsError::Unsupported { option },
        ScanError::MissingValue(option) => RunOptionsError::MissingValue { option },
        ScanError::NotABool { option, value } => {
            RunOptionsError::InvalidValue { option, value, reason: "expected true or false".into() }
        }
    })
}

/// The last `-m/--memory` in bytes (nerdctl takes the last one too).
pub(super) fn memory_option(options: &[String]) -> Result<Option<u64>, RunOptionsError> {
    let mut memory = None;
    for item in scan_run(options)? {
        if let Item::Opt { long: "memory", spelled, value } = item {
            memory = Some(parse_memory(&value, SizeUnits::Podman).map_err(|reason| invalid(&spelled, &value, reason))?);
        }
    }
    Ok(memory)
}

fn invalid(option: &str, value: &str, reason: impl Into<String>) -> RunOptionsError {
    RunOptionsError::InvalidValue { option: option.to_owned(), value: value.to_owned(), reason: reason.into() }
}

impl RunOptions {
    /// Parses `commandOptions`; `-e KEY` takes KEY from the agent's
    /// environment.
    pub fn parse(options: &[String]) -> Result<Self, RunOptionsError> {
        Self::parse_with_env(options, &|key| std::env::var(key).ok())
    }

    /// Parses `commandOptions`; `-e KEY` takes KEY from `agent_env` (and is
    /// left out when it has none, as docker does).
    pub fn parse_with_env(
        options: &[String],
        agent_env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RunOptionsError> {
        let mut run = RunOptions::default();
        let mut env_files = Vec::new();
        let mut env = Vec::new();
        for item in scan_run(options)? {
            let (long, spelled, value) = match item {
                Item::Opt { long, spelled, value } => (long, spelled, value),
                Item::Word(word) => return Err(RunOptionsError::StrayWord { word }),
            };
            let on = value == "true";
            match long {
                "env" => env.extend(env_entry(&value, agent_env)),
                "env-file" => env_files.extend(read_env_file(&value, agent_env)?),
                "volume" => run.binds.push(volume(&value)?),
                "mount" => run.binds.push(mount(&spelled, &value)?),
                "user" => run.user = Some(value),
                "entrypoint" => run.entrypoint = Some(value),
                "workdir" => run.workdir = Some(absolute(&spelled, value)?),
                "label" => run.labels.push(label(&value)),
                "network" => run.network = network(&spelled, &value)?,
                "publish" => run.ports.push(publish(&spelled, &value)?),
                "memory" => {
                    let bytes = parse_memory(&value, SizeUnits::Podman).map_err(|r| invalid(&spelled, &value, r))?;
                    run.memory = Some(bytes);
                }
                "cpus" => run.cpus = Some(cpus(&spelled, &value)?),
                "read-only" => run.read_only = on,
                "privileged" => run.privileged = on,
                "cap-add" => run.cap_add.push(capability(&spelled, &value)?),
                "cap-drop" => run.cap_drop.push(capability(&spelled, &value)?),
                "restart" if value == "no" => {}
                "restart" => return Err(RunOptionsError::Restart { value }),
                "name" => run.name = Some(container_name(&spelled, value)?),
                "hostname" => run.hostname = Some(hostname(&spelled, value)?),
                // Accepted and ignored: see the module's documentation.
                _ => {}
            }
        }
        run.env = env_files.into_iter().chain(env).collect();
        Ok(run)
    }
}

/// `KEY=VALUE` as it is; `KEY` alone with the agent's value, if it has one.
fn env_entry(entry: &str, agent_env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if entry.contains('=') {
        return Some(entry.to_owned());
    }
    agent_env(entry).map(|value| format!("{entry}={value}"))
}

/// The entries of an env file: `KEY=VALUE` or `KEY` lines; `#` comments
/// and blank lines skipped.
fn read_env_file(path: &str, agent_env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<String>, RunOptionsError> {
    let error = |reason: String| RunOptionsError::EnvFile { path: path.to_owned(), reason };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let mut entries = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = line.split_once('=').map_or(line, |(key, _)| key);
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(error(format!("line {} has no valid variable name: '{line}'", number + 1)));
        }
        entries.extend(env_entry(line, agent_env));
    }
    Ok(entries)
}

/// `-v /SRC:/DST[:ro|rw]`.
fn volume(value: &str) -> Result<BindMount, RunOptionsError> {
    let not_a_bind = || RunOptionsError::NotABind { value: value.to_owned() };
    let parts: Vec<&str> = value.split(':').collect();
    let (source, destination, mode) = match parts.as_slice() {
        [source, destination] => (*source, *destination, None),
        [source, destination, mode] => (*source, *destination, Some(*mode)),
        _ => return Err(not_a_bind()),
    };
    if !source.starts_with('/') {
        return Err(not_a_bind());
    }
    let destination = absolute("-v", destination.to_owned())?;
    let read_only = match mode {
        None | Some("rw") => false,
        Some("ro") => true,
        Some(other) => return Err(invalid("-v", value, format!("mode '{other}' is not ro or rw"))),
    };
    Ok(BindMount { source: source.to_owned(), destination, read_only })
}

/// `--mount type=bind,source=/SRC,destination=/DST[,readonly|ro[=true|false]]`.
fn mount(option: &str, value: &str) -> Result<BindMount, RunOptionsError> {
    let (mut kind, mut source, mut destination, mut read_only) = (None, None, None, false);
    for field in value.split(',') {
        let (key, val) = field.split_once('=').map_or((field, None), |(k, v)| (k, Some(v)));
        match (key, val) {
            ("type", Some(v)) => kind = Some(v),
            ("src" | "source", Some(v)) => source = Some(v),
            ("dst" | "destination" | "target", Some(v)) => destination = Some(v),
            ("readonly" | "ro", None | Some("true" | "1")) => read_only = true,
            ("readonly" | "ro", Some("false" | "0")) => read_only = false,
            _ => {
                return Err(invalid(
                    option,
                    value,
                    format!("'{field}' is not one of type, source, destination, readonly"),
                ));
            }
        }
    }
    if kind != Some("bind") {
        return Err(RunOptionsError::NotABind { value: value.to_owned() });
    }
    let source =
        source.filter(|s| s.starts_with('/')).ok_or_else(|| RunOptionsError::NotABind { value: value.to_owned() })?;
    let destination = destination.ok_or_else(|| invalid(option, value, "no destination"))?;
    Ok(BindMount { source: source.to_owned(), destination: absolute(option, destination.to_owned())?, read_only })
}

/// A path that must be absolute inside the container.
fn absolute(option: &str, path: String) -> Result<String, RunOptionsError> {
    if path.starts_with('/') { Ok(path) } else { Err(invalid(option, &path, "not an absolute path")) }
}

/// `-l k=v` (`k` alone: an empty value, as docker does).
fn label(value: &str) -> (String, String) {
    value.split_once('=').map_or((value.to_owned(), String::new()), |(k, v)| (k.to_owned(), v.to_owned()))
}

fn network(option: &str, value: &str) -> Result<NetworkMode, RunOptionsError> {
    match value {
        "bridge" => Ok(NetworkMode::Bridge),
        "host" => Ok(NetworkMode::Host),
        "none" => Ok(NetworkMode::None),
        _ => Err(invalid(option, value, "the containerd runtime supports the networks bridge, host and none")),
    }
}

/// `-p [ip:]HOST:CONTAINER[/tcp|udp]`; an IPv6 address in brackets.
fn publish(option: &str, value: &str) -> Result<PortMapping, RunOptionsError> {
    let bad = |reason: &str| invalid(option, value, reason);
    let (ports, protocol) = match value.rsplit_once('/') {
        None => (value, Protocol::Tcp),
        Some((ports, "tcp")) => (ports, Protocol::Tcp),
        Some((ports, "udp")) => (ports, Protocol::Udp),
        Some(_) => return Err(bad("the protocol must be tcp or udp")),
    };
    let (host_ip, ports) = match ports.strip_prefix('[') {
        Some(v6) => {
            let (ip, rest) =
                v6.split_once("]:").ok_or_else(|| bad("an IPv6 address is written [ADDR]:HOST:CONTAINER"))?;
            (Some(ip), rest)
        }
        None if ports.matches(':').count() == 2 => ports.split_once(':').map_or((None, ports), |(ip, r)| (Some(ip), r)),
        None => (None, ports),
    };
    let host_ip = match host_ip {
        Some(ip) if !ip.is_empty() => Some(ip.parse::<IpAddr>().map_err(|_| bad("the host address is no IP address"))?),
        _ => None,
    };
    let (host, container) = ports
        .split_once(':')
        .ok_or_else(|| bad("write HOST_PORT:CONTAINER_PORT (a random host port is not supported)"))?;
    if host.contains('-') || container.contains('-') {
        return Err(bad("port ranges are not supported, publish each port"));
    }
    let port =
        |p: &str| p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(|| bad("a port is a number from 1 to 65535"));
    Ok(PortMapping { host_ip, host_port: port(host)?, container_port: port(container)?, protocol })
}

fn cpus(option: &str, value: &str) -> Result<f64, RunOptionsError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|c| c.is_finite() && *c > 0.0)
        .ok_or_else(|| invalid(option, value, "expected a positive number of CPUs like 0.5 or 2"))
}

/// A capability as `CAP_NAME` (any case, with or without `CAP_`) or `ALL`.
fn capability(option: &str, value: &str) -> Result<String, RunOptionsError> {
    let upper = value.to_ascii_uppercase();
    if upper == "ALL" {
        return Ok(upper);
    }
    let name = if upper.starts_with("CAP_") { upper } else { format!("CAP_{upper}") };
    if ALL_CAPABILITIES.contains(&name.as_str()) {
        Ok(name)
    } else {
        Err(invalid(option, value, "not a Linux capability"))
    }
}

/// containerd's container id charset: `[A-Za-z0-9][A-Za-z0-9_.-]{0,75}`.
fn container_name(option: &str, name: String) -> Result<String, RunOptionsError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first_ok && rest_ok && name.len() <= 76 {
        Ok(name)
    } else {
        Err(invalid(option, &name, "a container name is 1 to 76 of [A-Za-z0-9_.-], starting with a letter or digit"))
    }
}

/// A host name: 1 to 64 of letters, digits, `-` and `.`.
fn hostname(option: &str, name: String) -> Result<String, RunOptionsError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'));
    if ok { Ok(name) } else { Err(invalid(option, &name, "a host name is 1 to 64 of letters, digits, '-' and '.'")) }
}
