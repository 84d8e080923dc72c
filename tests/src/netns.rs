//! Two test hosts on one machine for partition tests: network namespaces
//! this test makes itself (`ip netns add`), one for the server and one for
//! the agent, joined by a veth pair in a private /30. Only addresses inside
//! these namespaces are used. A partition sets the agent's end of the link
//! down: the server's side sees nothing more, no FIN and no RST, as when a
//! cable or radio link drops. Programs enter a namespace with
//! `nsenter --net` only (not `ip netns exec`, which remounts /sys and so
//! breaks podman's cgroups). Dropping the value deletes both namespaces and
//! with them the link.

use std::process::Command;

/// A server host and an agent host joined by one link.
pub struct TestNet {
    server_ns: String,
    agent_ns: String,
    agent_link: String,
    /// The server host's address on the link.
    pub server_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (iproute2; run `bash tools/setup.sh`): {e}"));
    assert!(
        out.status.success(),
        "`ip {}` failed (partition tests need root and iproute2): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl TestNet {
    /// Makes the two namespaces and the link; `tag` (a few characters)
    /// keeps names unique among tests running at once.
    pub fn create(tag: &str) -> Self {
        let id = std::process::id() % 100_000;
        let server_ns = format!("ank-{tag}-{id}-srv");
        let agent_ns = format!("ank-{tag}-{id}-agt");
        // Interface names have at most 15 characters.
        let (server_link, agent_link) = (format!("as{tag}{id}"), format!("aa{tag}{id}"));
        assert!(agent_link.len() <= 15, "tag '{tag}' too long for an interface name");
        // 10.213.x.y/30 from the process id: distinct for parallel tests.
        let (hi, lo) = ((id / 64) % 256, (id % 64) * 4);
        let server_ip = format!("10.213.{hi}.{}", lo + 1);
        let agent_ip = format!("10.213.{hi}.{}", lo + 2);
        let net = Self { server_ns, agent_ns, agent_link, server_ip };
        for ns in [&net.server_ns, &net.agent_ns] {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&["-n", &net.server_ns, "link", "add", &server_link, "type", "veth", "peer", "name", &net.agent_link]);
        ip(&["-n", &net.server_ns, "link", "set", &net.agent_link, "netns", &net.agent_ns]);
        ip(&["-n", &net.server_ns, "addr", "add", &format!("{}/30", net.server_ip), "dev", &server_link]);
        ip(&["-n", &net.agent_ns, "addr", "add", &format!("{agent_ip}/30"), "dev", &net.agent_link]);
        ip(&["-n", &net.server_ns, "link", "set", &server_link, "up"]);
        ip(&["-n", &net.agent_ns, "link", "set", &net.agent_link, "up"]);
        net
    }

    /// Command prefix that runs a program on the server host.
    pub fn on_server_host(&self) -> Vec<String> {
        vec!["nsenter".into(), format!("--net=/var/run/netns/{}", self.server_ns)]
    }

    /// Command prefix that runs a program on the agent host.
    pub fn on_agent_host(&self) -> Vec<String> {
        vec!["nsenter".into(), format!("--net=/var/run/netns/{}", self.agent_ns)]
    }

    /// Cuts the link silently.
    pub fn partition(&self) {
        ip(&["-n", &self.agent_ns, "link", "set", &self.agent_link, "down"]);
    }

    /// Restores the link.
    pub fn heal(&self) {
        ip(&["-n", &self.agent_ns, "link", "set", &self.agent_link, "up"]);
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for ns in [&self.server_ns, &self.agent_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
