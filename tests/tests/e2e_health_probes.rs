//! End to end with the built binaries and real podman: the agent's probes
//! (issue 39). A readiness `httpGet` probe reached in the container's
//! network namespace (no published port) keeps Ready False until the
//! server in the container answers; a failing liveness `exec` probe
//! restarts the container under restartPolicy ALWAYS, with an Unhealthy
//! event that carries the probe's output.

use std::time::{Duration, Instant};

use ank_tests::binaries::Cluster;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The `-o wide` row of workload `name`: state, READY, AVAILABLE.
fn row(c: &Cluster, name: &str) -> Option<(String, String, String)> {
    let table = text(&c.ank(&["get", "workloads", "-o", "wide"]).stdout);
    table.lines().skip(1).find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        (cols.first() == Some(&name) && cols.len() >= 6)
            .then(|| (cols[3].to_owned(), cols[4].to_owned(), cols[5].to_owned()))
    })
}

/// Polls `f` every 200 ms until it gives `Some`, failing after `limit`.
fn poll<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let began = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(began.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

// [stest of feature H6]
#[test]
fn e2e_an_http_readiness_probe_keeps_ready_false_until_the_server_in_the_container_answers() {
    ank_tests::require_podman();
    let agent = format!("e2e_probe_ready_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: {agent}
    restartPolicy: NEVER
    readinessProbe:
      httpGet: {{path: /index.html, port: 8080}}
      periodSeconds: 1
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sh", "-c", "sleep 4; mkdir /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www"]
"#
    );
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    // Running, but not Ready: the server in the container does not answer yet.
    let (ready, available) = poll(Duration::from_secs(60), "web Running", || {
        row(&c, "web").filter(|(state, ..)| state == "Running(Ok)").map(|(_, r, a)| (r, a))
    });
    assert_eq!(ready, "False", "Ready while httpd is not up yet");
    assert_ne!(available, "True");
    let began = Instant::now();
    let o = c.ank(&["wait", "workload/web", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "wait failed: {}", text(&o.stderr));
    assert!(began.elapsed() >= Duration::from_secs(1), "Ready came before httpd could answer");
    let (state, ready, _) = row(&c, "web").expect("a row of web");
    assert_eq!((state.as_str(), ready.as_str()), ("Running(Ok)", "True"), "Ankaios' state stays Running(Ok)");
    let d = text(&c.ank(&["describe", "workload", "web"]).stdout);
    assert!(d.contains("readinessProbe passed"), "{d}");
    assert!(d.contains("Probes:           readiness httpGet 127.0.0.1:8080/index.html every 1s"), "{d}");
    // No port was published: the probe went into the container's namespace.
    let ports = c.containers().iter().map(|j| j["Ports"].to_string()).collect::<Vec<_>>();
    assert!(ports.iter().all(|p| p == "null" || p == "[]"), "{ports:?}");
}

// [stest of feature H6]
#[test]
fn e2e_a_failing_liveness_exec_probe_restarts_the_container_with_an_unhealthy_event() {
    ank_tests::require_podman();
    let agent = format!("e2e_probe_live_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  worker:
    runtime: podman
    agent: {agent}
    restartPolicy: ALWAYS
    livenessProbe:
      exec: {{command: [cat, /tmp/alive]}}
      periodSeconds: 1
      failureThreshold: 2
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sh", "-c", "trap 'exit 0' TERM; mkdir -p /tmp; echo yes > /tmp/alive; sleep 5; rm /tmp/alive; sleep 100000 & wait"]
"#
    );
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let first = poll(Duration::from_secs(60), "the first container", || {
        c.containers().first().and_then(|j| j["Id"].as_str().map(str::to_owned))
    });
    // The probe passes at first (busybox has no /tmp: the workload makes it).
    let alive = std::process::Command::new("podman").args(["exec", &first, "cat", "/tmp/alive"]).output().unwrap();
    assert_eq!(text(&alive.stdout), "yes\n", "{}", text(&alive.stderr));
    let d = text(&c.ank(&["describe", "workload", "worker"]).stdout);
    assert!(!d.contains("Unhealthy"), "unhealthy while /tmp/alive exists: {d}");
    let second = poll(Duration::from_secs(90), "a new container after the liveness failure", || {
        c.containers().iter().filter_map(|j| j["Id"].as_str()).find(|id| *id != first).map(str::to_owned)
    });
    assert_ne!(first, second);
    let d = poll(Duration::from_secs(30), "the Unhealthy and Restarted events", || {
        let d = text(&c.ank(&["describe", "workload", "worker"]).stdout);
        (d.contains("Unhealthy") && d.contains("Restarted")).then_some(d)
    });
    assert!(
        d.contains("livenessProbe failed 2 times: exec [cat /tmp/alive] exit 1: cat: can't open '/tmp/alive'"),
        "{d}"
    );
}

// [stest of feature H6: self-reported health over the control interface]
#[test]
fn e2e_a_self_report_readiness_probe_follows_the_workloads_own_health_reports() {
    ank_tests::require_podman();
    let agent = format!("e2e_probe_self_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    // busybox has no protobuf: the frames are written byte by byte (octal).
    // Hello{protocolVersion: "1.0.0"}: 09 | 0a 07 | 12 05 "1.0.0".
    // HealthReport{healthy: true, message: "ok"}: 09 | a2 06 06 | 08 01 12 02 "ok".
    // No allow rules: the selfReport probe alone gets the workload its pipes.
    let script = r#"sleep 3; exec 3>/run/ankaios/control_interface/output; printf "\011\012\007\022\0051.0.0" >&3; while true; do printf "\011\242\006\006\010\001\022\002ok" >&3; sleep 1; done"#;
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  selfie:
    runtime: podman
    agent: {agent}
    restartPolicy: NEVER
    readinessProbe:
      selfReport: {{}}
      periodSeconds: 2
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sh", "-c", '{script}']
"#
    );
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));
    let ready = poll(Duration::from_secs(60), "selfie Running", || {
        row(&c, "selfie").filter(|(state, ..)| state == "Running(Ok)").map(|(_, r, _)| r)
    });
    assert_eq!(ready, "False", "Ready before any health report");
    let o = c.ank(&["wait", "workload/selfie", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "wait failed: {}", text(&o.stderr));
    let d = text(&c.ank(&["describe", "workload", "selfie"]).stdout);
    assert!(d.contains("readinessProbe passed") && d.contains("readiness selfReport every 2s"), "{d}");
}

/// A container of this test, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = std::process::Command::new("podman").args(["rm", "-f", "-t", "0", &self.0]).output();
    }
}

// [stest of feature H6: the podman probe executor on its own]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_the_podman_probe_executor_runs_exec_tcp_and_http_in_the_container() {
    use ank_agent::probes::{ProbeAction, ProbeExecutor, ProbeTarget};
    use ank_agent::runtime_connectors::WorkloadId;
    use ank_agent::runtime_connectors::podman::PodmanCli;
    use ank_agent::runtime_connectors::podman::probes::PodmanProbes;
    use ank_common::health_spec::{ExecAction, HttpGetAction, TcpSocketAction};

    ank_tests::require_podman();
    let name = format!("e2e_probe_exec_{}", std::process::id());
    let run = std::process::Command::new("podman")
        .args(["run", "-d", "--name", &name, "localhost/busybox:latest", "sh", "-c"])
        .arg("trap 'exit 0' TERM; sleep 2; mkdir /www; echo ok > /www/index.html; httpd -f -p 8080 -h /www & wait")
        .output()
        .expect("podman run");
    assert!(run.status.success(), "{}", text(&run.stderr));
    let c = Container(name);
    let id = text(&run.stdout).trim().to_owned();
    let probes = PodmanProbes::new(PodmanCli::default());
    let target = ProbeTarget::new(WorkloadId(id));
    let t = Duration::from_secs(2);
    let exec = |cmd: &[&str]| ProbeAction::Exec(ExecAction { command: cmd.iter().map(|s| s.to_string()).collect() });
    let tcp = ProbeAction::TcpSocket(TcpSocketAction { port: 8080, host: None });
    let http = |path: &str| ProbeAction::HttpGet(HttpGetAction { path: path.into(), port: 8080, host: None });

    let o = probes.probe(&target, &exec(&["cat", "/nope"]), t).await;
    assert!(!o.passed);
    assert_eq!(o.output, "exec [cat /nope] exit 1: cat: can't open '/nope': No such file or directory");
    assert!(probes.probe(&target, &exec(&["true"]), t).await.passed);
    // Exec probes go through the container's OCI runtime (a quarter of
    // podman exec's CPU), confined as podman exec confines: same user,
    // capabilities, seccomp mode, cgroup and namespaces.
    let runtime = target.oci.lock().unwrap().clone().expect("looked up");
    let runtime = runtime.expect("the OCI runtime of a podman container is found");
    let podman_runtime = text(
        &std::process::Command::new("podman")
            .args(["info", "--format", "{{.Host.OCIRuntime.Path}}"])
            .output()
            .expect("podman info")
            .stdout,
    );
    assert_eq!(runtime.binary, std::path::PathBuf::from(podman_runtime.trim()));
    // A digest of who and where the command is: user, capabilities,
    // seccomp, no_new_privs, cgroups and namespaces.
    let confinement = "{ id; grep -E '^(CapEff|CapBnd|Seccomp|NoNewPrivs):' /proc/self/status; cat /proc/self/cgroup; \
        for n in mnt pid net ipc uts; do readlink /proc/self/ns/$n; done; } | md5sum";
    let by_podman = std::process::Command::new("podman")
        .args(["exec", &c.0, "sh", "-c", confinement])
        .output()
        .expect("podman exec");
    let digest = text(&by_podman.stdout).split_whitespace().next().expect("a digest").to_owned();
    // The probe passes only when its command sees the same digest.
    let same = format!("{confinement} | grep -q '^{digest} '");
    let o = probes.probe(&target, &exec(&["sh", "-c", &same]), t).await;
    assert!(o.passed, "the probe's command is confined as podman exec's: {o:?}");
    let other = format!("{confinement} | grep -q '^00000000 '");
    assert!(!probes.probe(&target, &exec(&["sh", "-c", &other]), t).await.passed, "another digest fails");
    // Nothing listens yet: refused, in the container's namespace.
    let o = probes.probe(&target, &tcp, t).await;
    assert!(!o.passed && o.output.contains("127.0.0.1:8080") && o.output.contains("refused"), "{o:?}");
    assert!(target.pid.lock().unwrap().is_some(), "the pid is cached");
    let o = poll(Duration::from_secs(30), "httpd in the container", || {
        let rt = tokio::runtime::Handle::current();
        let o = tokio::task::block_in_place(|| rt.block_on(probes.probe(&target, &tcp, t)));
        o.passed.then_some(o)
    });
    assert_eq!(o.output, "tcp 127.0.0.1:8080: connected");
    let o = probes.probe(&target, &http("/index.html"), t).await;
    assert!(o.passed && o.output.starts_with("HTTP/1.") && o.output.contains("200"), "{o:?}");
    let o = probes.probe(&target, &http("/missing"), t).await;
    assert!(!o.passed && o.output.contains("404"), "{o:?}");

    // Restarted: a new pid; the cached one is stale and asked for again.
    let old = *target.pid.lock().unwrap();
    let r = std::process::Command::new("podman").args(["restart", "-t", "2", &c.0]).output().expect("restart");
    assert!(r.status.success(), "{}", text(&r.stderr));
    let o = poll(Duration::from_secs(30), "httpd after the restart", || {
        let rt = tokio::runtime::Handle::current();
        let o = tokio::task::block_in_place(|| rt.block_on(probes.probe(&target, &http("/index.html"), t)));
        o.passed.then_some(o)
    });
    assert!(o.output.contains("200"));
    assert_ne!(*target.pid.lock().unwrap(), old);
}
