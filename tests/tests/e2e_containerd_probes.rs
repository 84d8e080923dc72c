//! Probes of containerd workloads on a real containerd: a readiness
//! `httpGet` probe reached in the task's network namespace keeps Ready
//! False until the server in the container answers, and a failing liveness
//! `exec` probe (run by runc in containerd's state root) restarts the task
//! under restartPolicy ALWAYS, with an Unhealthy event carrying the output.

use std::time::Duration;

use ank_tests::binaries::Cluster;
use ank_tests::containerd::{IMAGE, Namespace};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn e2e_containerd_readiness_and_liveness_probes_reach_into_the_task() {
    let ns = Namespace::new("probes");
    let agent = format!("e2e_cd_probes_{}", std::process::id());
    let c = Cluster::start_with(&agent, None, &["--containerd-namespace", &ns.name]);
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  web:
    runtime: containerd
    agent: {agent}
    restartPolicy: NEVER
    readinessProbe:
      httpGet: {{path: /index.html, port: 8080}}
      periodSeconds: 1
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: ["--net=none"]
      commandArgs: ["sh", "-c", "sleep 3; mkdir /www; echo ok > /www/index.html; exec httpd -f -p 8080 -h /www"]
  worker:
    runtime: containerd
    agent: {agent}
    restartPolicy: ALWAYS
    livenessProbe:
      exec: {{command: [cat, /tmp/alive]}}
      periodSeconds: 1
      failureThreshold: 2
    runtimeConfig: |
      image: {IMAGE}
      commandOptions: ["--net=none"]
      commandArgs: ["sh", "-c", "trap 'exit 0' TERM; mkdir -p /tmp; echo yes > /tmp/alive; sleep 4; rm /tmp/alive; sleep 100000 & wait"]
"#
    );
    let o = c.ank_stdin(&["--no-wait", "apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply failed: {}", text(&o.stderr));

    let o = c.ank(&["wait", "workload/web", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "web never Ready: {}", text(&o.stderr));
    let d = text(&c.ank(&["describe", "workload", "web"]).stdout);
    assert!(d.contains("readinessProbe passed"), "{d}");

    let first = ank_tests::poll(Duration::from_secs(60), "the worker's first task", || {
        ns.tasks().into_iter().find(|(id, _, s)| id.starts_with("worker.") && s == "RUNNING").map(|(_, pid, _)| pid)
    });
    let second = ank_tests::poll(Duration::from_secs(60), "a new task after the liveness failure", || {
        ns.tasks()
            .into_iter()
            .find(|(id, pid, s)| id.starts_with("worker.") && s == "RUNNING" && *pid != first)
            .map(|(_, pid, _)| pid)
    });
    assert_ne!(first, second);
    let d = ank_tests::poll(Duration::from_secs(30), "the Unhealthy event", || {
        let d = text(&c.ank(&["describe", "workload", "worker"]).stdout);
        d.contains("Unhealthy").then_some(d)
    });
    assert!(d.contains("exec [cat /tmp/alive] exit 1: cat: can't open '/tmp/alive'"), "{d}");
}
