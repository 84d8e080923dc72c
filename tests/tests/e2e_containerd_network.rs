//! Networking of containerd workloads on a real containerd with Debian's
//! CNI plugins: the default bridge network gives the task an address of
//! nerdctl's 10.4.0.0/24 and a published port answers on the host; deleting
//! the workload releases address and port; a container removed behind the
//! agent's back (with `ctr`) has its network released at the next reconcile.

use std::io::{Read, Write};
use std::time::Duration;

use ank_tests::binaries::Cluster;
use ank_tests::containerd::{IMAGE, Namespace};

const LEASES: &str = "/var/lib/cni/networks/bridge";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The leased addresses of containers whose id starts with `prefix` (and
/// names this test's agent).
fn leases_of(prefix: &str) -> Vec<String> {
    let agent = format!("e2e_cd_net_{}", std::process::id());
    let Ok(dir) = std::fs::read_dir(LEASES) else { return Vec::new() };
    dir.flatten()
        .filter(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.starts_with(prefix) && t.contains(&agent)))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn get(port: u16) -> Option<String> {
    let mut s = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

#[test]
fn e2e_containerd_bridge_network_publishes_a_port_and_releases_it() {
    let ns = Namespace::new("net");
    let agent = format!("e2e_cd_net_{}", std::process::id());
    let c =
        Cluster::start_with(&agent, None, &["--containerd-namespace", &ns.name, "--podman-reconcile-interval", "1s"]);
    let port = ank_tests::free_port();
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  web:
    runtime: containerd
    agent: {agent}
    restartPolicy: NEVER
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: ["-p", "127.0.0.1:{port}:8080"]
      commandArgs: ["sh", "-c", "mkdir /www; echo served > /www/index.html; cat /etc/hosts; exec httpd -f -p 8080 -h /www"]
  gone:
    runtime: containerd
    agent: {agent}
    restartPolicy: NEVER
    runtimeConfig: |
      image: {IMAGE}
      commandArgs: ["sleep", "100000"]
"#
    );
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let body = ank_tests::poll(Duration::from_secs(60), "the published port answers", || {
        get(port).filter(|b| b.contains("served"))
    });
    assert!(body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200"), "{body}");
    let lease = ank_tests::poll(Duration::from_secs(10), "web's lease", || leases_of("web.").into_iter().next());
    assert!(lease.starts_with("10.4.0."), "{lease}");
    let logs = text(&c.ank(&["logs", "web"]).stdout);
    assert!(logs.contains(&lease), "/etc/hosts names the task's address {lease}: {logs}");

    // Removed behind the agent's back: released at the next reconcile.
    let gone = ank_tests::poll(Duration::from_secs(30), "gone's lease", || leases_of("gone.").into_iter().next());
    let id = ns.ids("containers").into_iter().find(|i| i.starts_with("gone.")).expect("gone's container");
    let _ = ns.ctr(&["tasks", "kill", "-s", "SIGKILL", &id]);
    ank_tests::poll(Duration::from_secs(10), "gone's task removed", || {
        ns.ctr(&["tasks", "rm", &id]).status.success().then_some(())
    });
    assert!(ns.ctr(&["containers", "rm", &id]).status.success());
    ank_tests::poll(Duration::from_secs(30), "gone's address released", || {
        (!leases_of("gone.").contains(&gone)).then_some(())
    });

    let o = c.ank(&["delete", "workload", "web", "gone"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    ank_tests::poll(Duration::from_secs(30), "web removed", || ns.ids("containers").is_empty().then_some(()));
    assert!(leases_of("web.").is_empty(), "web's address released");
    assert!(get(port).is_none(), "the port is closed");
    let nat = std::process::Command::new("iptables").args(["-t", "nat", "-S"]).output().expect("iptables");
    assert!(!text(&nat.stdout).contains(&agent), "no rule of the agent's containers is left");
}
