//! End to end with the built binaries and real podman: a `podman-kube`
//! workload is played, reported Running and torn down; workloads with bad
//! input fail with a state naming the cause while the others run.

use std::process::Command;
use std::time::Duration;

use ank_tests::binaries::Cluster;

fn state_and_info(c: &Cluster, name: &str) -> Option<String> {
    let o = c.ank(&["get", "workloads"]);
    String::from_utf8_lossy(&o.stdout).lines().find(|l| l.split_whitespace().next() == Some(name)).map(str::to_owned)
}

fn pod_exists(pod: &str) -> bool {
    Command::new("podman").args(["pod", "exists", pod]).status().is_ok_and(|s| s.success())
}

struct PodCleanup(String);

impl Drop for PodCleanup {
    fn drop(&mut self) {
        let _ = Command::new("podman").args(["pod", "rm", "-f", "-t", "0", &self.0]).output();
    }
}

#[test]
// [stest->swdd~podman-kube-create-workload-apply-manifest~1]
fn e2e_kube_workload_runs_and_bad_input_fails_naming_the_cause() {
    let agent = format!("e2e_kube_{}", std::process::id());
    let pod = format!("e2ekube-{}", std::process::id());
    let _cleanup = PodCleanup(pod.clone());
    let c = Cluster::start(&agent, None);
    let manifest = format!(
        r#"apiVersion: v1
workloads:
  kube:
    runtime: podman-kube
    agent: {agent}
    runtimeConfig: |
      manifest: |
        apiVersion: v1
        kind: Pod
        metadata:
          name: {pod}
        spec:
          restartPolicy: Never
          containers:
          - name: main
            image: localhost/busybox:latest
            imagePullPolicy: Never
            command: ["/bin/sh", "-c", "sleep 100000"]
  broken:
    runtime: podman
    agent: {agent}
    runtimeConfig: |
      imagee: localhost/busybox:latest
  badfile:
    runtime: podman
    agent: {agent}
    files:
      - mountPoint: /etc/x
        binaryData: "%%% not base64"
    runtimeConfig: |
      image: localhost/busybox:latest
  fine:
    runtime: podman
    agent: {agent}
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sleep", "100000"]
"#
    );
    let o = c.ank_stdin(&["apply", "--no-wait", "-"], Some(&manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(60), |c| {
        ["kube", "fine"].iter().all(|n| state_and_info(c, n).is_some_and(|l| l.contains("Running(Ok)")))
            && ["broken", "badfile"]
                .iter()
                .all(|n| state_and_info(c, n).is_some_and(|l| l.contains("Pending(StartingFailed)")))
    });
    assert!(pod_exists(&pod));
    let broken = state_and_info(&c, "broken").unwrap();
    // Unknown keys are ignored as by Ankaios; the misspelt key leaves `image` missing.
    assert!(broken.contains("missing field `image`"), "the info names the missing field: {broken}");
    let badfile = state_and_info(&c, "badfile").unwrap();
    assert!(badfile.contains("/etc/x") && badfile.contains("base64"), "{badfile}");

    let o = c.ank(&["delete", "workload", "kube"]);
    assert!(o.status.success(), "delete: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| state_and_info(c, "kube").is_none() && !pod_exists(&pod));
}

fn pod_id(pod: &str) -> Option<String> {
    let o = Command::new("podman").args(["pod", "inspect", "--format", "{{.Id}}", pod]).output().ok()?;
    o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
}

#[test]
// [stest->swdd~podman-kube-get-workload-id-uses-volumes~1]
fn e2e_kube_workload_is_resumed_after_an_agent_restart() {
    let agent = format!("e2e_kuberes_{}", std::process::id());
    let pod = format!("e2ekuberes-{}", std::process::id());
    let _cleanup = PodCleanup(pod.clone());
    let mut c = Cluster::start(&agent, None);
    let manifest = format!(
        "apiVersion: v1\nworkloads:\n  kube:\n    runtime: podman-kube\n    agent: {agent}\n    runtimeConfig: |\n      manifest: |\n        apiVersion: v1\n        kind: Pod\n        metadata:\n          name: {pod}\n        spec:\n          containers:\n          - name: main\n            image: localhost/busybox:latest\n            imagePullPolicy: Never\n            command: [\"/bin/sh\", \"-c\", \"sleep 100000\"]\n"
    );
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest));
    assert!(o.status.success(), "apply: {}", String::from_utf8_lossy(&o.stderr));
    c.wait_until(Duration::from_secs(30), |c| state_and_info(c, "kube").is_some_and(|l| l.contains("Running(Ok)")));
    let before = pod_id(&pod).expect("pod exists");
    c.kill_agent();
    c.wait_until(Duration::from_secs(20), |c| {
        let o = c.ank(&["get", "agents"]);
        o.status.success() && !String::from_utf8_lossy(&o.stdout).contains(&c.agent)
    });
    c.start_agent();
    c.wait_until(Duration::from_secs(30), |c| {
        state_and_info(c, "kube").is_some_and(|l| l.contains("Running(Ok)") && l.contains(&c.agent))
            && String::from_utf8_lossy(&c.ank(&["get", "agents"]).stdout).contains(&c.agent)
    });
    assert_eq!(pod_id(&pod).as_deref(), Some(before.as_str()), "the same pod, not played again");
    let o = c.ank(&["delete", "workload", "kube"]);
    assert!(o.status.success());
    c.wait_until(Duration::from_secs(30), |_| !pod_exists(&pod));
}
