//! The daemons as systemd runs them, with the built binaries: sd_notify
//! messages (READY=1 only when serving / after the first ServerHello,
//! STATUS= lines, WATCHDOG=1, STOPPING=1) on a socket the test plays
//! systemd with; `--check` of both; journald-style logs when
//! `JOURNAL_STREAM` names stderr; no key material in logs even at trace
//! level; SIGTERM leaving the workloads running or, when configured,
//! stopping them.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ank_certs::{Ca, Role, Validity};
use ank_tests::binaries::{Cluster, bin};
use ank_tests::{free_port, signal, terminate};

/// A notification socket standing in for systemd's.
struct FakeSystemd {
    socket: UnixDatagram,
    path: PathBuf,
    seen: Vec<String>,
}

impl FakeSystemd {
    fn new(dir: &Path, name: &str) -> Self {
        let path = dir.join(name);
        let socket = UnixDatagram::bind(&path).expect("bind notify socket");
        socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        Self { socket, path, seen: Vec::new() }
    }

    /// Waits for a message containing `needle`; returns it.
    fn wait_for(&mut self, needle: &str, limit: Duration) -> String {
        let start = Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            if let Some(m) = self.seen.iter().find(|m| m.contains(needle)) {
                return m.clone();
            }
            assert!(start.elapsed() < limit, "no '{needle}' within {limit:?}; got {:?}", self.seen);
            if let Ok(n) = self.socket.recv(&mut buf) {
                self.seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }
}

/// A daemon process whose stderr goes to a file.
struct Daemon {
    child: Option<Child>,
    log: PathBuf,
}

impl Daemon {
    fn spawn(mut cmd: Command, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).expect("log file");
        let child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(file).spawn().expect("spawn daemon");
        Self { child: Some(child), log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn terminate(&mut self, limit: Duration) -> std::process::ExitStatus {
        terminate(self.child.take().expect("running"), limit)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

fn check(binary: &str, args: &[&str]) -> Output {
    Command::new(bin(binary)).arg("--check").args(args).output().expect("run --check")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn e2e_daemons_notify_systemd_and_answer_check() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().display().to_string();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut server_systemd = FakeSystemd::new(dir.path(), "server.notify");
    let mut agent_systemd = FakeSystemd::new(dir.path(), "agent.notify");

    let agent_check = ["--name", "agent_D", "--run-folder", &run];
    let o = check("ank-agent", &agent_check);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("nothing answers on"), "{}", text(&o));

    let mut server_cmd = Command::new(bin("ank-server"));
    server_cmd.args(["--insecure", "--address", &addr, "--run-folder", &run, "--shutdown-grace-ms", "60000"]);
    server_cmd.env("NOTIFY_SOCKET", &server_systemd.path).env("WATCHDOG_USEC", "1000000");
    let mut server = Daemon::spawn(server_cmd, dir.path().join("server.log"));
    let ready = server_systemd.wait_for("READY=1", Duration::from_secs(10));
    assert_eq!(
        ready,
        format!("READY=1\nSTATUS=serving on {addr} (insecure), 0 agents connected, 0 workloads in the desired state")
    );
    server_systemd.wait_for("WATCHDOG=1", Duration::from_secs(3));
    let o = check("ank-server", &["--run-folder", &run]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("serving on"), "{}", text(&o));

    let mut agent_cmd = Command::new(bin("ank-agent"));
    agent_cmd.args(["--insecure", "--name", "agent_D", "--run-folder", &run]);
    agent_cmd.args(["--server-url", &format!("http://{addr}")]);
    agent_cmd.env("NOTIFY_SOCKET", &agent_systemd.path).env("WATCHDOG_USEC", "1000000");
    let mut agent = Daemon::spawn(agent_cmd, dir.path().join("agent.log"));
    let ready = agent_systemd.wait_for("READY=1", Duration::from_secs(10));
    assert_eq!(ready, format!("READY=1\nSTATUS=connected to server http://{addr}, 0 workloads (0 running)"));
    let before_ready: Vec<&String> = agent_systemd.seen.iter().take_while(|m| !m.contains("READY=1")).collect();
    assert!(
        before_ready.iter().all(|m| m.starts_with("STATUS=connect") || *m == "WATCHDOG=1"),
        "only connection progress and watchdog pings before READY: {before_ready:?}"
    );
    agent_systemd.wait_for("WATCHDOG=1", Duration::from_secs(3));
    server_systemd.wait_for("STATUS=serving on 127.0.0.1", Duration::from_secs(1));
    server_systemd.wait_for("1 agent connected", Duration::from_secs(5));
    let o = check("ank-agent", &agent_check);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("ank-agent: connected to server http://{addr}, 0 workloads (0 running)")
    );

    // `systemctl reload` sends SIGHUP: neither daemon may die of it.
    signal(agent.child.as_ref().unwrap(), "HUP");
    signal(server.child.as_ref().unwrap(), "HUP");
    let start = Instant::now();
    while !(agent.log().contains("SIGHUP received") && server.log().contains("SIGHUP received")) {
        assert!(start.elapsed() < Duration::from_secs(10), "SIGHUP not logged:\n{}\n{}", agent.log(), server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    for (binary, args) in [("ank-server", &["--run-folder", run.as_str()][..]), ("ank-agent", &agent_check[..])] {
        let o = check(binary, args);
        assert_eq!(o.status.code(), Some(0), "{binary} alive after SIGHUP: {}", text(&o));
    }

    // The server stops: its streams close at once, not after the grace
    // period; the agent keeps running but is no longer healthy.
    let status = server.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status:?}\n{}", server.log());
    server_systemd.wait_for("STOPPING=1", Duration::from_secs(1));
    assert!(!server.log().contains("did not finish"), "{}", server.log());
    agent_systemd.wait_for("STATUS=disconnected from server", Duration::from_secs(10));
    let o = check("ank-agent", &agent_check);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("not healthy: disconnected from server"), "{}", text(&o));
    let o = check("ank-server", &["--run-folder", &run]);
    assert_eq!(o.status.code(), Some(1), "a stopped server does not answer: {}", text(&o));

    let status = agent.terminate(Duration::from_secs(10));
    assert!(status.success(), "SIGTERM is a clean stop: {status:?}\n{}", agent.log());
    agent_systemd.wait_for("STOPPING=1", Duration::from_secs(1));
    assert!(!dir.path().join("ank-agent-agent_D.sock").exists(), "the health socket is removed at exit");
    let log = agent.log();
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.lines().all(|l| l.starts_with("20")), "plain logs start with a timestamp, one event per line:\n{log}");
}

#[test]
fn e2e_journald_style_logs_have_priorities_and_no_timestamps_or_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("e2e daemon CA").expect("CA");
    let local = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    let server_cert = ca.issue(Role::Server, "ank-server", &local, Validity::Days(1)).expect("server certificate");
    let key = server_cert.key_pem.clone();
    let key_body = key.lines().nth(1).expect("a PEM body line").to_owned();
    let conf = dir.path().join("server.conf");
    std::fs::write(
        &conf,
        format!(
            "version = 'v1'\nca_pem_content = '''{}'''\ncrt_pem_content = '''{}'''\nkey_pem_content = '''{key}'''\n",
            ca.cert_pem(),
            server_cert.cert_pem
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    std::fs::File::create(&log).unwrap();
    let meta = std::fs::metadata(&log).unwrap();
    use std::os::unix::fs::MetadataExt;
    let journal_stream = format!("{}:{}", meta.dev(), meta.ino());

    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = Command::new(bin("ank-server"));
    cmd.args([
        "-x",
        &conf.display().to_string(),
        "--address",
        &addr,
        "--run-folder",
        &dir.path().display().to_string(),
    ]);
    cmd.env("JOURNAL_STREAM", &journal_stream).env("RUST_LOG", "trace");
    let file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let mut server = Daemon { child: Some(cmd.stdin(Stdio::null()).stderr(file).spawn().unwrap()), log };
    let start = Instant::now();
    while !server.log().contains("listening on") {
        assert!(start.elapsed() < Duration::from_secs(10), "server did not start:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // A client without a certificate makes the server log a warning.
    let _ = Command::new(bin("ank"))
        .args(["--insecure", "--server-url", &format!("http://{addr}"), "get", "workloads"])
        .output();
    assert!(server.terminate(Duration::from_secs(10)).success());

    let log = server.log();
    assert!(log.contains("<6>") && log.contains("<7>"), "info and debug/trace priorities:\n{log}");
    for line in log.lines() {
        let prio = line.strip_prefix('<').and_then(|l| l.split_once('>')).map(|(p, _)| p);
        assert!(matches!(prio, Some("3" | "4" | "6" | "7")), "every line has a syslog priority prefix: '{line}'");
        assert!(!line.contains('\x1b'), "no colours for the journal: '{line}'");
        let after = line.split_once('>').unwrap().1;
        assert!(!after.starts_with("20"), "no timestamp for the journal: '{line}'");
    }
    assert!(!log.contains(&key_body), "the private key must never be logged");
}

#[test]
fn e2e_sigterm_leaves_workloads_running_unless_told_to_stop_them() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("m.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nworkloads:\n  stay:\n    runtime: podman\n    agent: agent_T\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [\"sleep\", \"600\"]\n",
    )
    .unwrap();
    let mut cluster = Cluster::start("agent_T", Some(&manifest));
    let running = |c: &Cluster| c.workload_rows().iter().any(|(n, s)| n == "stay" && s == "Running(Ok)");
    cluster.wait_until(Duration::from_secs(30), running);
    let id = cluster.containers()[0]["Id"].as_str().unwrap().to_owned();

    assert!(cluster.terminate_agent(Duration::from_secs(10)).success());
    let after: Vec<String> = cluster.containers().iter().map(|c| format!("{} {}", c["Id"], c["State"])).collect();
    assert_eq!(after, [format!("\"{id}\" \"running\"")], "the default SIGTERM leaves the workload running");

    cluster.start_agent();
    cluster.wait_until(Duration::from_secs(30), running);
    assert_eq!(cluster.containers()[0]["Id"].as_str(), Some(id.as_str()), "taken over, not recreated");

    let mut stopping = Cluster::start_with("agent_T2", None, &["--stop-workloads-on-shutdown"]);
    let m2 = dir.path().join("m2.yaml");
    std::fs::write(
        &m2,
        std::fs::read_to_string(&manifest).unwrap().replace("stay", "go").replace("agent_T", "agent_T2"),
    )
    .unwrap();
    let o = stopping.ank(&["apply", &m2.display().to_string()]);
    assert!(o.status.success(), "{}", text(&o));
    stopping.wait_until(Duration::from_secs(30), |c| {
        c.workload_rows().iter().any(|(n, s)| n == "go" && s == "Running(Ok)")
    });
    assert!(stopping.terminate_agent(Duration::from_secs(25)).success());
    assert!(stopping.containers().is_empty(), "stopped and removed: {:?}", stopping.containers());
    // Still wanted by the server: shown as AgentDisconnected, not gone.
    stopping.wait_until(Duration::from_secs(5), |c| {
        c.workload_rows().iter().any(|(n, s)| n == "go" && s == "AgentDisconnected")
    });
}
