//! [`Cni`]: attaches a container's network namespace to the bridge
//! network by running the CNI plugins of its configuration list (bridge
//! with host-local IPAM, portmap), CNI spec 1.0.0 (which
//! Debian's containernetworking-plugins 1.1.1 speak), and detaches it.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::masquerade;
use super::plugin::{self, CallParams};
use super::state::{Paths, State, netns_id};
use super::{NetworkError, Subnet};
use crate::runtime_connectors::containerd::run_options::{PortMapping, Protocol};

/// Where network namespaces are pinned by default.
pub const PIN_DIR: &str = "/run/netns";

/// The plugins the bridge network runs (`host-local` by delegation).
pub const REQUIRED_PLUGINS: &[&str] = &["bridge", "host-local", "portmap"];

/// The CNI spec version of the configurations and results.
pub const CNI_VERSION: &str = "1.0.0";

/// The container's interface.
const IFNAME: &str = "eth0";

/// The bridge network containers are attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeNetwork {
    /// The CNI network name (host-local keeps its leases in
    /// `/var/lib/cni/networks/<name>`; portmap and bridge name their
    /// iptables rules after it).
    pub name: String,
    /// The Linux bridge (at most 15 characters).
    pub bridge: String,
    pub subnet: Subnet,
}

impl Default for BridgeNetwork {
    /// nerdctl's default network.
    fn default() -> Self {
        BridgeNetwork {
            name: "bridge".into(),
            bridge: "nerdctl0".into(),
            subnet: Subnet { addr: std::net::Ipv4Addr::new(10, 4, 0, 0), prefix: 24 },
        }
    }
}

impl BridgeNetwork {
    /// The network configuration list.
    pub fn conflist(&self) -> Value {
        json!({
            "cniVersion": CNI_VERSION,
            "name": self.name,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": true,
                    // Masquerading and forwarding: one set of rules for
                    // the network (shared_rules), not one per container.
                    "ipMasq": false,
                    "hairpinMode": true,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{
                            "subnet": self.subnet.to_string(),
                            "gateway": self.subnet.first_host().to_string(),
                        }]],
                        "routes": [{ "dst": "0.0.0.0/0" }],
                    },
                },
                { "type": "portmap", "capabilities": { "portMappings": true } },
            ],
        })
    }

    /// The list without portmap, for a container that publishes no port.
    pub fn conflist_without_ports(&self) -> Value {
        let mut list = self.conflist();
        if let Some(plugins) = list.get_mut("plugins").and_then(Value::as_array_mut) {
            plugins.retain(|p| p.get("type").and_then(Value::as_str) != Some("portmap"));
        }
        list
    }

    fn validate(&self) -> Result<(), NetworkError> {
        let name_ok =
            !self.name.is_empty() && self.name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !name_ok {
            return Err(NetworkError::InvalidConfig(format!(
                "network name {:?} (letters, digits, '_', '.', '-')",
                self.name
            )));
        }
        let bridge_ok = (1..=15).contains(&self.bridge.len())
            && self.bridge.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !bridge_ok {
            return Err(NetworkError::InvalidConfig(format!(
                "bridge name {:?} (1 to 15 letters, digits, '_', '.', '-')",
                self.bridge
            )));
        }
        Ok(())
    }
}

/// A container's attachment to the bridge network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The container's address on the bridge network.
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub gateway: Option<IpAddr>,
    /// The MAC address of the container's interface.
    pub mac: Option<String>,
    /// The container's interface (`eth0`).
    pub interface: String,
}

/// A CNI result that describes no attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoAttachment {
    #[error("no \"ips\"")]
    NoIps,
    #[error("no address in \"ips\"")]
    NoAddress,
}

impl Attachment {
    /// The attachment a (CNI 1.0.0) result describes: its first IPv4
    /// address, else its first address.
    pub(super) fn from_result(result: &Value) -> Result<Attachment, NoAttachment> {
        let ips = result.get("ips").and_then(Value::as_array).ok_or(NoAttachment::NoIps)?;
        let parsed: Vec<(&Value, IpAddr, u8)> = ips
            .iter()
            .filter_map(|ip| {
                let (addr, len) = ip.get("address")?.as_str()?.split_once('/')?;
                Some((ip, addr.parse().ok()?, len.parse().ok()?))
            })
            .collect();
        let (entry, ip, prefix_len) =
            parsed.iter().find(|(_, ip, _)| ip.is_ipv4()).or(parsed.first()).copied().ok_or(NoAttachment::NoAddress)?;
        let gateway = entry.get("gateway").and_then(Value::as_str).and_then(|g| g.parse().ok());
        let iface = entry
            .get("interface")
            .and_then(Value::as_u64)
            .and_then(|i| result.get("interfaces")?.get(usize::try_from(i).ok()?));
        Ok(Attachment {
            ip,
            prefix_len,
            gateway,
            mac: iface.and_then(|i| i.get("mac")?.as_str()).map(str::to_string),
            interface: iface.and_then(|i| i.get("name")?.as_str()).unwrap_or(IFNAME).to_string(),
        })
    }
}

/// Runs the CNI plugins of the bridge network.
#[derive(Debug, Clone)]
pub struct Cni {
    /// Where plugins are looked up, in order.
    pub plugin_dirs: Vec<PathBuf>,
    /// Where each container's DEL state is kept.
    pub state_dir: PathBuf,
    /// Where each container's network namespace is pinned (bind-mounted):
    /// not in the state folder, so that a run folder can be removed
    /// while containers run (`/run/netns`, as `ip netns` and containerd's
    /// CRI keep theirs; gone at a reboot, as the namespaces are).
    pub pin_dir: PathBuf,
    pub network: BridgeNetwork,
    /// The time one plugin call may take.
    pub timeout: Duration,
}

impl Cni {
    /// The default plugin folders and network, keeping state in `state_dir`
    /// (e.g. `<run_dir>/containerd-net`).
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Cni {
            plugin_dirs: vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
            state_dir: state_dir.into(),
            pin_dir: PathBuf::from(PIN_DIR),
            network: BridgeNetwork::default(),
            timeout: Duration::from_secs(30),
        }
    }

    /// The containers with an attachment state in the state folder.
    pub fn attached(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.state_dir) else { return Vec::new() };
        entries.flatten().filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned)).collect()
    }

    /// Whether the configuration is valid and every plugin is installed.
    pub fn check(&self) -> Result<(), NetworkError> {
        self.network.validate()?;
        let missing: Vec<String> =
            REQUIRED_PLUGINS.iter().filter(|p| self.find_plugin(p).is_none()).map(|p| p.to_string()).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(NetworkError::MissingPlugins { missing, dirs: self.plugin_dirs.clone() })
        }
    }

    /// Attaches the network namespace `netns` (the created, not yet
    /// started task's `/proc/<pid>/ns/net`) of `container_id` to the bridge
    /// network and publishes `ports`. On failure, what was done is undone.
    pub async fn add(
        &self,
        container_id: &str,
        netns: &Path,
        ports: &[PortMapping],
    ) -> Result<Attachment, NetworkError> {
        validate_container_id(container_id)?;
        self.check()?;
        super::shared_rules::ensure(&self.network.bridge, &self.network.subnet, self.timeout).await?;
        let port_mappings = port_mappings(ports)?;
        if netns_id(netns)? == netns_id(Path::new("/proc/self/ns/net"))? {
            return Err(NetworkError::InvalidConfig(format!(
                "{} is the agent's own network namespace",
                netns.display()
            )));
        }
        tokio::fs::create_dir_all(&self.state_dir).await.map_err(|source| NetworkError::Io {
            what: "creating the CNI state folder",
            path: self.state_dir.clone(),
            source,
        })?;
        tokio::fs::create_dir_all(&self.pin_dir).await.map_err(|source| NetworkError::Io {
            what: "creating the network namespace pin folder",
            path: self.pin_dir.clone(),
            source,
        })?;
        let paths = Paths::new(&self.state_dir, &self.pin_dir, container_id);
        if paths.load().await?.is_some() {
            // A former attachment of this id that was never deleted.
            self.del(container_id, ports).await?;
        }
        // Without ports portmap has nothing to do: one plugin call less per
        // create. DEL runs what the state says ADD ran.
        let conflist =
            if port_mappings.is_empty() { self.network.conflist_without_ports() } else { self.network.conflist() };
        let mut state = State { conflist, port_mappings, netns_id: None, result: None };
        // Stored before anything is done, so that a DEL after a crash in
        // the middle of ADD knows what to undo.
        paths.store(&state).await?;
        match self.attach(container_id, netns, &paths, &mut state).await {
            Ok(attachment) => Ok(attachment),
            Err(e) => {
                if let Err(undo) = self.del(container_id, ports).await {
                    tracing::warn!("undoing the failed CNI ADD of {container_id}: {undo}");
                }
                Err(e)
            }
        }
    }

    /// Pins the namespace and runs ADD of every plugin.
    async fn attach(
        &self,
        container_id: &str,
        netns: &Path,
        paths: &Paths,
        state: &mut State,
    ) -> Result<Attachment, NetworkError> {
        state.netns_id = Some(paths.pin(netns)?);
        paths.store(state).await?;
        let netns = paths.pin.to_string_lossy().into_owned();
        let cni_path = self.cni_path();
        let params = CallParams {
            command: "ADD",
            container_id,
            netns: &netns,
            ifname: IFNAME,
            cni_path: &cni_path,
            timeout: self.timeout,
        };
        for conf in &plugins(&state.conflist) {
            let (kind, binary) = self.plugin_binary(conf)?;
            let config = plugin_config(&state.conflist, conf, state);
            let result = plugin::call(&binary, &kind, &params, &config).await?.ok_or_else(|| {
                NetworkError::BadResult { plugin: kind.clone(), command: "ADD", reason: "no result".into() }
            })?;
            state.result = Some(result);
            paths.store(state).await?;
        }
        let result = state
            .result
            .as_ref()
            .ok_or_else(|| NetworkError::InvalidConfig("the network configuration has no plugins".into()))?;
        Attachment::from_result(result).map_err(|reason| NetworkError::BadResult {
            plugin: "(last of the list)".into(),
            command: "ADD",
            reason: reason.to_string(),
        })
    }

    /// Detaches `container_id`: runs DEL of every plugin, last first, so
    /// the IPAM lease and the published ports' rules are released, and
    /// unpins its namespace. Works after an agent restart (it runs the
    /// configuration and port mappings ADD stored; `ports` is used only
    /// if the state has none) and when the task's namespace is gone;
    /// nothing to do when `container_id` is not attached.
    pub async fn del(&self, container_id: &str, ports: &[PortMapping]) -> Result<(), NetworkError> {
        validate_container_id(container_id)?;
        let paths = Paths::new(&self.state_dir, &self.pin_dir, container_id);
        let Some(mut state) = paths.load().await? else {
            return paths.unpin();
        };
        if state.port_mappings.is_empty() {
            state.port_mappings = port_mappings(ports)?;
        }
        let netns = paths.pinned(state.netns_id).map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let cni_path = self.cni_path();
        let params = CallParams {
            command: "DEL",
            container_id,
            netns: &netns,
            ifname: IFNAME,
            cni_path: &cni_path,
            timeout: self.timeout,
        };
        let mut first_error = None;
        for conf in plugins(&state.conflist).iter().rev() {
            let outcome = match self.plugin_binary(conf) {
                Ok((kind, binary)) => {
                    let config = plugin_config(&state.conflist, conf, &state);
                    plugin::call(&binary, &kind, &params, &config).await.map(drop)
                }
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                tracing::warn!("CNI DEL of {container_id}: {e}");
                first_error.get_or_insert(e);
            }
        }
        if first_error.is_none() && netns.is_empty() {
            let network = network_name(&state.conflist);
            first_error = masquerade::remove(&network, container_id, self.timeout).await.err();
        }
        if let Some(e) = first_error {
            // The state stays for a later DEL to try again.
            return Err(e);
        }
        paths.unpin()?;
        paths.remove().await
    }

    /// The attachment of `container_id` that ADD stored, if any (the
    /// container's address after an agent restart).
    pub async fn attachment(&self, container_id: &str) -> Result<Option<Attachment>, NetworkError> {
        validate_container_id(container_id)?;
        let paths = Paths::new(&self.state_dir, &self.pin_dir, container_id);
        let Some(result) = paths.load().await?.and_then(|s| s.result) else {
            return Ok(None);
        };
        Attachment::from_result(&result)
            .map(Some)
            .map_err(|reason| NetworkError::State { path: paths.state, reason: reason.to_string() })
    }

    fn cni_path(&self) -> String {
        let dirs: Vec<_> = self.plugin_dirs.iter().map(|d| d.to_string_lossy()).collect();
        dirs.join(":")
    }

    fn find_plugin(&self, kind: &str) -> Option<PathBuf> {
        self.plugin_dirs.iter().map(|d| d.join(kind)).find(|p| is_executable(p))
    }

    fn plugin_binary(&self, conf: &Value) -> Result<(String, PathBuf), NetworkError> {
        let kind = conf
            .get("type")
            .and_then(Value::as_str)
            .filter(|k| !k.contains('/') && !k.is_empty())
            .ok_or_else(|| NetworkError::InvalidConfig(format!("plugin without a type: {conf}")))?;
        let binary = self.find_plugin(kind).ok_or_else(|| NetworkError::MissingPlugins {
            missing: vec![kind.to_string()],
            dirs: self.plugin_dirs.clone(),
        })?;
        Ok((kind.to_string(), binary))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// CNI's container id syntax (it also makes a safe file name).
fn validate_container_id(id: &str) -> Result<(), NetworkError> {
    let mut chars = id.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok { Ok(()) } else { Err(NetworkError::InvalidContainerId(id.to_string())) }
}

fn network_name(conflist: &Value) -> String {
    conflist.get("name").and_then(Value::as_str).unwrap_or_default().to_string()
}

fn plugins(conflist: &Value) -> Vec<Value> {
    conflist.get("plugins").and_then(Value::as_array).cloned().unwrap_or_default()
}

/// The configuration one plugin of the list gets on stdin: its own
/// object with the list's `cniVersion` and `name`, the port mappings when
/// it has the `portMappings` capability, and the result so far.
fn plugin_config(conflist: &Value, conf: &Value, state: &State) -> Value {
    let mut config = conf.clone();
    if let Some(obj) = config.as_object_mut() {
        obj.insert("cniVersion".into(), conflist["cniVersion"].clone());
        obj.insert("name".into(), conflist["name"].clone());
        let wants_ports = conf.pointer("/capabilities/portMappings").and_then(Value::as_bool).unwrap_or(false);
        if wants_ports && !state.port_mappings.is_empty() {
            obj.insert("runtimeConfig".into(), json!({ "portMappings": state.port_mappings }));
        }
        if let Some(result) = &state.result {
            obj.insert("prevResult".into(), result.clone());
        }
    }
    config
}

/// `runtimeConfig.portMappings` of `ports`.
fn port_mappings(ports: &[PortMapping]) -> Result<Vec<Value>, NetworkError> {
    ports
        .iter()
        .map(|p| {
            if p.host_port == 0 || p.container_port == 0 {
                return Err(NetworkError::InvalidConfig(format!(
                    "port mapping {}:{}: ports must not be 0",
                    p.host_port, p.container_port
                )));
            }
            let protocol = match p.protocol {
                Protocol::Tcp => "tcp",
                Protocol::Udp => "udp",
            };
            let mut m = json!({
                "hostPort": p.host_port,
                "containerPort": p.container_port,
                "protocol": protocol,
            });
            if let Some(ip) = p.host_ip {
                m["hostIP"] = json!(ip.to_string());
            }
            Ok(m)
        })
        .collect()
}
