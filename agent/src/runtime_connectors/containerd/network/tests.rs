//! Tests of [`Cni`], most of them real: as root, with the CNI plugins of
//! `/usr/lib/cni`, `ip` and `iptables`, on a network of their own
//! (`ank-cni-test`, bridge `ankcnitest0`, 10.4.254.0/24) that they remove
//! at the end. A missing dependency fails them, it does not skip them.
//! They take a file lock, so that they run one at a time, also against
//! other test processes of this crate.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::*;
use crate::runtime_connectors::containerd::run_options::{PortMapping, Protocol};

const NET: &str = "ank-cni-test";
const BRIDGE: &str = "ankcnitest0";

/// Runs `cmd`; panics with its output when it cannot run or fails.
fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("this test needs `{cmd}` ({e})"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One real test at a time; the test network is removed when dropped.
struct TestNet {
    cni: Cni,
    _state: tempfile::TempDir,
    _lock: Flock<std::fs::File>,
}

impl TestNet {
    fn new() -> TestNet {
        assert!(nix::unistd::geteuid().is_root(), "the CNI tests need root (network namespaces, iptables)");
        std::fs::create_dir_all("/run/lock").unwrap();
        let file = std::fs::File::create("/run/lock/ank-agent-cni-tests.lock").unwrap();
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .unwrap_or_else(|(_, e)| panic!("locking the CNI tests' lock: {e}"));
        let state = tempfile::tempdir().unwrap();
        let mut cni = Cni::new(state.path().join("containerd-net"));
        // Pins next to the state, in the test's own folder.
        cni.pin_dir = cni.state_dir.clone();
        cni.network =
            BridgeNetwork { name: NET.into(), bridge: BRIDGE.into(), subnet: "10.4.254.0/24".parse().unwrap() };
        cni.check().expect("the CNI plugins of Debian's containernetworking-plugins");
        TestNet { cni, _state: state, _lock: lock }
    }
}

impl Drop for TestNet {
    /// Detaches what a failed test left attached (with the real plugins),
    /// unmounts any pin left, removes the bridge and the leases.
    fn drop(&mut self) {
        let mut cni = self.cni.clone();
        cni.plugin_dirs = Cni::new("").plugin_dirs;
        let _ = std::thread::spawn(move || {
            let entries: Vec<PathBuf> = std::fs::read_dir(&cni.state_dir)
                .map(|dir| dir.filter_map(|e| Some(e.ok()?.path())).collect())
                .unwrap_or_default();
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() {
                for path in &entries {
                    if path.extension().is_some_and(|e| e == "json")
                        && let Some(id) = path.file_stem().and_then(|s| s.to_str())
                    {
                        let _ = rt.block_on(cni.del(id, &[]));
                    }
                }
            }
            for path in &entries {
                if path.extension().is_some_and(|e| e == "netns") {
                    let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
                }
            }
        })
        .join();
        super::shared_rules::remove_blocking(BRIDGE, &self.cni.network.subnet);
        let _ = Command::new("ip").args(["link", "del", BRIDGE]).output();
        let _ = std::fs::remove_dir_all(lease_dir());
    }
}

fn lease_dir() -> PathBuf {
    Path::new("/var/lib/cni/networks").join(NET)
}

/// A network namespace made by `ip netns add`, deleted when dropped.
struct Netns {
    name: String,
    deleted: bool,
}

impl Netns {
    fn new() -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("ank-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        run("ip", &["netns", "add", &name]);
        Netns { name, deleted: false }
    }

    fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.name)
    }

    fn delete(&mut self) {
        run("ip", &["netns", "del", &self.name]);
        self.deleted = true;
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if !self.deleted {
            let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
        }
    }
}

fn container_id(tag: &str) -> String {
    format!("ank-test-{tag}-{}", std::process::id())
}

fn tcp(host_port: u16, container_port: u16) -> PortMapping {
    PortMapping { host_ip: None, host_port, container_port, protocol: Protocol::Tcp }
}

fn nat_rules_of(id: &str) -> Vec<String> {
    run("iptables", &["-t", "nat", "-S"]).lines().filter(|l| l.contains(id)).map(str::to_string).collect()
}

/// A TCP server inside `netns` on port 80 answering "hello" to
/// `connections` clients; it ends after them or 20 s. A thread of its own
/// (`setns` changes the calling thread's namespace), so std's clock and
/// sleep, not tokio's.
#[allow(clippy::disallowed_methods)]
fn serve_in(netns: &Path, connections: usize) -> std::sync::mpsc::Receiver<()> {
    let netns = std::fs::File::open(netns).unwrap();
    let (ready, is_ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        nix::sched::setns(netns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns into the test namespace");
        let listener = TcpListener::bind("0.0.0.0:80").expect("listening in the namespace");
        listener.set_nonblocking(true).unwrap();
        let _ = ready.send(());
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut served = 0;
        while served < connections && Instant::now() < deadline {
            match listener.accept() {
                Ok((mut conn, _)) => {
                    let _ = conn.write_all(b"hello");
                    served += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    is_ready
}

/// What the server at `addr` answers (an error text when it cannot).
fn fetch(addr: SocketAddr) -> Result<String, String> {
    let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).map_err(|e| e.to_string())?;
    Ok(text)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The host's address towards its default route.
fn host_ip() -> Ipv4Addr {
    let route = run("ip", &["-4", "route", "get", "192.0.2.1"]);
    let mut words = route.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "src")
        .and_then(|_| words.next())
        .and_then(|ip| ip.parse().ok())
        .unwrap_or_else(|| panic!("no source address in `ip route get`: {route}"))
}

#[tokio::test]
async fn real_add_publishes_a_port_and_del_releases_address_and_rules() {
    let net = TestNet::new();
    let ns = Netns::new();
    let id = container_id("add");
    let port = free_port();
    let ports = [tcp(port, 80)];
    let att = net.cni.add(&id, &ns.path(), &ports).await.unwrap();

    let IpAddr::V4(ip) = att.ip else { panic!("not IPv4: {att:?}") };
    assert!(net.cni.network.subnet.contains(ip), "{att:?}");
    assert_eq!(att.prefix_len, 24);
    assert_eq!(att.gateway, Some(IpAddr::V4(Ipv4Addr::new(10, 4, 254, 1))));
    assert_eq!(att.interface, "eth0");
    assert!(att.mac.is_some(), "{att:?}");
    let inside = run("ip", &["netns", "exec", &ns.name, "ip", "-4", "addr", "show", "eth0"]);
    assert!(inside.contains(&format!("inet {ip}/24")), "{inside}");
    assert!(lease_dir().join(ip.to_string()).exists());
    assert!(!nat_rules_of(&id).is_empty(), "no nat rules for {id}");
    assert_eq!(net.cni.attachment(&id).await.unwrap(), Some(att.clone()));

    // portmap (snat, its default) lets 127.0.0.1 be DNATed to the bridge.
    let localnet = format!("/proc/sys/net/ipv4/conf/{BRIDGE}/route_localnet");
    assert_eq!(std::fs::read_to_string(localnet).unwrap().trim(), "1");

    let ready = serve_in(&ns.path(), 4);
    ready.recv_timeout(Duration::from_secs(5)).unwrap();
    let host_ip = host_ip().to_string();
    let direct = fetch(SocketAddr::new(att.ip, 80));
    let via_host_ip = fetch(SocketAddr::new(host_ip.parse().unwrap(), port));
    let via_localhost = fetch(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port));
    assert_eq!(direct.as_deref(), Ok("hello"), "the container's own address");
    assert_eq!(via_host_ip.as_deref(), Ok("hello"), "the host's address");
    assert_eq!(via_localhost.as_deref(), Ok("hello"), "127.0.0.1");
    // From another namespace (another container on the bridge): through
    // PREROUTING, as from another host, and back over the bridge (hairpin).
    let other_ns = Netns::new();
    let other = container_id("client");
    net.cni.add(&other, &other_ns.path(), &[]).await.unwrap();
    let port_text = port.to_string();
    let from_other = run("ip", &["netns", "exec", &other_ns.name, "busybox", "nc", "-w", "3", &host_ip, &port_text]);
    assert_eq!(from_other, "hello", "the host's address from another container");
    net.cni.del(&other, &[]).await.unwrap();

    net.cni.del(&id, &ports).await.unwrap();
    assert!(!lease_dir().join(ip.to_string()).exists(), "lease kept");
    assert_eq!(nat_rules_of(&id), Vec::<String>::new());
    assert!(run("iptables", &["-S"]).lines().all(|l| !l.contains(&ip.to_string())));
    let after = Command::new("ip").args(["netns", "exec", &ns.name, "ip", "link", "show", "eth0"]).output().unwrap();
    assert!(!after.status.success(), "eth0 still in the namespace");
    assert!(fetch(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port)).is_err());
    assert_eq!(net.cni.attachment(&id).await.unwrap(), None);
    let leftovers: Vec<_> = std::fs::read_dir(&net.cni.state_dir).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Twice is fine.
    net.cni.del(&id, &ports).await.unwrap();
}

#[tokio::test]
async fn real_del_after_the_namespace_is_gone_and_after_a_restart() {
    let net = TestNet::new();
    let mut ns = Netns::new();
    let id = container_id("gone");
    let ports = [tcp(free_port(), 8080)];
    let att = net.cni.add(&id, &ns.path(), &ports).await.unwrap();
    // The task's path is gone (ADD pinned the namespace); a new agent
    // (same state folder) deletes it.
    ns.delete();
    let restarted = Cni { network: BridgeNetwork::default(), ..net.cni.clone() };
    restarted.del(&id, &[]).await.unwrap();
    assert!(!lease_dir().join(att.ip.to_string()).exists(), "lease kept");
    assert_eq!(nat_rules_of(&id), Vec::<String>::new());
    restarted.del(&id, &[]).await.unwrap();
}

#[tokio::test]
async fn real_del_without_the_pin_releases_the_lease_and_the_ports() {
    let net = TestNet::new();
    let mut ns = Netns::new();
    let id = container_id("nopin");
    let ports = [tcp(free_port(), 8080)];
    let att = net.cni.add(&id, &ns.path(), &ports).await.unwrap();
    // As if the pin were lost (say, unmounted by hand): the namespace is
    // gone for good, DEL runs with an empty CNI_NETNS.
    let pin = super::state::Paths::new(&net.cni.state_dir, &net.cni.pin_dir, &id).pin;
    nix::mount::umount2(&pin, nix::mount::MntFlags::MNT_DETACH).unwrap();
    ns.delete();
    net.cni.del(&id, &ports).await.unwrap();
    assert!(!lease_dir().join(att.ip.to_string()).exists(), "lease kept");
    assert_eq!(nat_rules_of(&id), Vec::<String>::new());
    let ip = format!("{}/", att.ip);
    assert!(run("iptables", &["-S"]).lines().all(|l| !l.contains(&ip)));
    assert!(run("iptables", &["-t", "nat", "-S"]).lines().all(|l| !l.contains(&ip)));
}

#[tokio::test]
async fn del_of_a_container_never_added_is_fine() {
    let net = TestNet::new();
    net.cni.del(&container_id("never"), &[]).await.unwrap();
}

#[tokio::test]
async fn add_refuses_the_agents_own_namespace() {
    let net = TestNet::new();
    let err = net.cni.add(&container_id("self"), Path::new("/proc/self/ns/net"), &[]).await.unwrap_err();
    assert!(err.to_string().contains("agent's own network namespace"), "{err}");
}

#[test]
fn check_names_the_missing_plugins() {
    let empty = tempfile::tempdir().unwrap();
    let mut cni = Cni::new(empty.path().join("state"));
    cni.plugin_dirs = vec![empty.path().to_path_buf()];
    std::fs::write(empty.path().join("portmap"), "").unwrap(); // not executable
    let err = cni.check().unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, NetworkError::MissingPlugins { missing, .. }
            if missing == &["bridge", "host-local", "portmap"]),
        "{text}"
    );
    assert!(text.contains("missing: bridge, host-local, portmap"), "{text}");
    assert!(text.contains("apt install containernetworking-plugins"), "{text}");
    assert!(text.contains("--net=host or --net=none"), "{text}");
    assert!(text.contains(&empty.path().display().to_string()), "{text}");
}

/// A plugin folder with the real plugins but `bridge` replaced by `script`.
fn fake_bridge(script: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for plugin in REQUIRED_PLUGINS {
        let path = dir.path().join(plugin);
        if *plugin == "bridge" {
            std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        } else {
            std::os::unix::fs::symlink(Path::new("/usr/lib/cni").join(plugin), path).unwrap();
        }
    }
    dir
}

#[tokio::test]
async fn a_plugins_error_object_is_reported_and_add_is_undone() {
    let mut net = TestNet::new();
    let plugins = fake_bridge(
        r#"cat > /dev/null
if [ "$CNI_COMMAND" = DEL ]; then exit 0; fi
echo '{"cniVersion":"1.0.0","code":11,"msg":"no bridge today","details":"just a test"}'
exit 1"#,
    );
    net.cni.plugin_dirs = vec![plugins.path().to_path_buf()];
    let ns = Netns::new();
    let id = container_id("fails");
    let err = net.cni.add(&id, &ns.path(), &[tcp(free_port(), 80)]).await.unwrap_err();
    assert!(
        matches!(&err, NetworkError::Plugin { plugin, command: "ADD", code: Some(11), msg, details }
            if plugin == "bridge" && msg == "no bridge today" && details == "just a test"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "CNI plugin bridge (ADD) failed with code 11: no bridge today (just a test)");
    // Undone: no state, no pin.
    let leftovers: Vec<_> = std::fs::read_dir(&net.cni.state_dir).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[tokio::test]
async fn a_plugin_that_hangs_times_out() {
    let mut net = TestNet::new();
    let plugins = fake_bridge(r#"if [ "$CNI_COMMAND" = DEL ]; then exit 0; fi; exec sleep 30"#);
    net.cni.plugin_dirs = vec![plugins.path().to_path_buf()];
    net.cni.timeout = Duration::from_millis(300);
    let ns = Netns::new();
    let err = net.cni.add(&container_id("hangs"), &ns.path(), &[]).await.unwrap_err();
    assert!(matches!(&err, NetworkError::Timeout { plugin, command: "ADD", .. } if plugin == "bridge"), "{err:?}");
}

#[tokio::test]
async fn a_plugin_without_error_object_is_reported_with_its_stderr() {
    let mut net = TestNet::new();
    let plugins = fake_bridge(r#"if [ "$CNI_COMMAND" = DEL ]; then exit 0; fi; echo 'plain failure' >&2; exit 3"#);
    net.cni.plugin_dirs = vec![plugins.path().to_path_buf()];
    let ns = Netns::new();
    let err = net.cni.add(&container_id("stderr"), &ns.path(), &[]).await.unwrap_err();
    assert!(matches!(&err, NetworkError::Plugin { code: None, msg, .. } if msg == "plain failure"), "{err:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&net.cni.state_dir).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn attachment_of_a_result_prefers_ipv4_and_finds_its_interface() {
    let result = serde_json::json!({
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "nerdctl0", "mac": "aa:aa:aa:aa:aa:aa"},
            {"name": "vethx", "mac": "bb:bb:bb:bb:bb:bb"},
            {"name": "eth0", "mac": "cc:cc:cc:cc:cc:cc", "sandbox": "/proc/1/ns/net"}
        ],
        "ips": [
            {"interface": 2, "address": "fd00::5/64"},
            {"interface": 2, "address": "10.4.0.5/24", "gateway": "10.4.0.1"}
        ]
    });
    let att = Attachment::from_result(&result).unwrap();
    assert_eq!(att.ip, "10.4.0.5".parse::<IpAddr>().unwrap());
    assert_eq!(att.prefix_len, 24);
    assert_eq!(att.gateway, Some("10.4.0.1".parse().unwrap()));
    assert_eq!(att.mac.as_deref(), Some("cc:cc:cc:cc:cc:cc"));
    assert_eq!(att.interface, "eth0");
    assert!(Attachment::from_result(&serde_json::json!({"ips": []})).is_err());
}

#[test]
fn subnets_parse_and_print() {
    let s: Subnet = "10.4.0.7/24".parse().unwrap();
    assert_eq!(s.to_string(), "10.4.0.0/24");
    assert_eq!(s.first_host(), Ipv4Addr::new(10, 4, 0, 1));
    assert!(s.contains(Ipv4Addr::new(10, 4, 0, 200)));
    assert!(!s.contains(Ipv4Addr::new(10, 88, 0, 2)));
    for bad in ["10.4.0.0", "10.4.0.0/33", "10.4.0.0/4", "x/24", "::1/64"] {
        assert!(bad.parse::<Subnet>().is_err(), "{bad}");
    }
}

#[test]
fn the_default_network_is_nerdctls_and_lists_its_plugins() {
    let conflist = BridgeNetwork::default().conflist();
    assert_eq!(conflist["cniVersion"], "1.0.0");
    assert_eq!(conflist["name"], "bridge");
    assert_eq!(conflist["plugins"][0]["bridge"], "nerdctl0");
    assert_eq!(conflist["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], "10.4.0.0/24");
    let kinds: Vec<_> = conflist["plugins"].as_array().unwrap().iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["bridge", "portmap"]);
    let without = BridgeNetwork::default().conflist_without_ports();
    let kinds: Vec<_> = without["plugins"].as_array().unwrap().iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["bridge"], "no portmap call for a container without ports");
}

#[tokio::test]
async fn bad_container_ids_and_zero_ports_are_refused() {
    let cni = Cni::new("/nonexistent/state");
    for bad in ["", "../x", "a/b", "-a", "a b"] {
        let err = cni.del(bad, &[]).await.unwrap_err();
        assert!(matches!(err, NetworkError::InvalidContainerId(_)), "{bad:?}");
    }
    let err = cni.add("ok", Path::new("/proc/self/ns/net"), &[tcp(0, 80)]).await;
    assert!(matches!(err, Err(NetworkError::InvalidConfig(_))), "{err:?}");
}

#[tokio::test]
async fn real_published_port_answers_another_host() {
    let net = TestNet::new();
    let ns = Netns::new();
    let id = container_id("remote");
    let port = free_port();
    net.cni.add(&id, &ns.path(), &[tcp(port, 80)]).await.unwrap();
    let ready = serve_in(&ns.path(), 1);
    ready.recv_timeout(Duration::from_secs(5)).unwrap();
    // "Another host": a namespace on a link of its own to the host
    // (10.4.253.0/30), not on the bridge; deleting it deletes the link.
    let remote = Netns::new();
    let host_end = format!("ankr{}", std::process::id() % 100_000);
    run("ip", &["link", "add", &host_end, "type", "veth", "peer", "name", "ankpeer"]);
    run("ip", &["link", "set", "ankpeer", "netns", &remote.name]);
    run("ip", &["addr", "add", "10.4.253.1/30", "dev", &host_end]);
    run("ip", &["link", "set", &host_end, "up"]);
    let in_remote = |args: &[&str]| {
        let mut all = vec!["netns", "exec", &remote.name];
        all.extend_from_slice(args);
        run("ip", &all)
    };
    in_remote(&["ip", "addr", "add", "10.4.253.2/30", "dev", "ankpeer"]);
    in_remote(&["ip", "link", "set", "ankpeer", "up"]);
    in_remote(&["ip", "link", "set", "lo", "up"]);
    in_remote(&["ip", "route", "add", "default", "via", "10.4.253.1"]);
    let port_text = port.to_string();
    let answer = in_remote(&["busybox", "nc", "-w", "3", "10.4.253.1", &port_text]);
    assert_eq!(answer, "hello", "the host's address from another host");
    net.cni.del(&id, &[]).await.unwrap();
}
