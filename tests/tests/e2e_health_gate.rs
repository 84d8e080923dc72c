//! End to end with the built binaries and real podman: a health-gated
//! update (issue 39) whose new generation never becomes Ready is reverted
//! by the server to the last healthy spec within its deadline; `ank
//! --wait apply`, `ank get jobs` and `ank describe` say so.

use std::time::{Duration, Instant};

use ank_tests::binaries::Cluster;

/// `w` on `agent` running `image`, with `extra` lines appended to it.
fn manifest(agent: &str, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {image}\n      commandArgs: [\"sleep\", \"100039\"]\n{extra}"
    )
}

const GATE: &str = "    update:\n      healthyDeadline: 15s\n      minHealthyTime: 2s\n      autoRevert: true\n";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// [stest of feature: issue 39 health-gated update with automatic revert]
#[test]
fn e2e_a_gated_update_that_never_becomes_ready_is_reverted() {
    ank_tests::require_podman();
    let agent = format!("e2e_gate_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let v1 = manifest(&agent, "localhost/busybox:latest", "");
    let o = c.ank_stdin(&["apply", "-"], Some(&v1));
    assert!(o.status.success(), "apply v1 failed: {}", text(&o.stderr));
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "v1 not Ready: {}", text(&o.stderr));
    // The server sees v1 Ready at its next tick: v1 is the last healthy spec.
    std::thread::sleep(Duration::from_secs(2));

    // v2: an image that does not exist, gated, with autoRevert.
    let v2 = manifest(&agent, "localhost/busybox:no-such-tag-gate", GATE);
    let began = Instant::now();
    let o = c.ank_stdin(&["--wait", "apply", "-"], Some(&v2));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the job of v2 fails: {err}");
    assert!(err.contains("w: update gate: generation 2 not Ready within 15s ("), "{err}");
    assert!(err.contains("put back generation 1"), "{err}");
    let waited = began.elapsed();
    assert!(waited >= Duration::from_secs(14), "not before the deadline: {waited:?}");

    // v1 runs again within the deadline and some slack.
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "30s"]);
    assert!(o.status.success(), "v1 not Ready again: {}", text(&o.stderr));
    assert!(began.elapsed() < Duration::from_secs(15 + 30), "{:?}", began.elapsed());
    let running: Vec<String> = c
        .containers()
        .iter()
        .filter(|ct| ct["State"] == "running")
        .map(|ct| ct["Image"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(running, ["localhost/busybox:latest"], "v1's container runs");
    let state = text(&c.ank(&["get", "state", "desiredState.workloads.w.runtimeConfig"]).stdout);
    assert!(state.contains("localhost/busybox:latest"), "v1's spec is desired again: {state}");

    let jobs = text(&c.ank(&["get", "jobs"]).stdout);
    let row = jobs.lines().find(|l| l.trim_start().starts_with('2')).unwrap_or_default();
    assert!(row.contains("Failed") && row.contains("update gate"), "{jobs}");

    let describe = text(&c.ank(&["describe", "workload", "w"]).stdout);
    eprintln!("{err}\n{jobs}\n{describe}");
    assert!(describe.contains("Reverted:"), "{describe}");
    assert!(describe.contains("generation 2 not Ready within 15s") && describe.contains("put back generation 1"));
    let yaml = text(&c.ank(&["get", "workloads", "-o", "yaml"]).stdout);
    assert!(yaml.contains("reverted:") && yaml.contains("fromGeneration: 2"), "{yaml}");
}

/// A web server whose `/cgi-bin/ready` answers `status` with the body `version`;
/// its readiness probe asks that path, and its update is gated.
fn web(agent: &str, version: &str, status: &str) -> String {
    let script = format!(
        "trap 'exit 0' TERM; mkdir -p /www/cgi-bin; printf '%s\\n' '#!/bin/sh' 'echo Status: {status}' 'echo' 'echo {version}' > /www/cgi-bin/ready; chmod +x /www/cgi-bin/ready; httpd -f -p 8080 -h /www & wait"
    );
    format!(
        "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: {agent}\n    restartPolicy: NEVER\n    readinessProbe:\n      httpGet: {{path: /cgi-bin/ready, port: 8080}}\n      periodSeconds: 1\n      failureThreshold: 2\n    update: {{healthyDeadline: 20s, minHealthyTime: 3s, autoRevert: true}}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [\"sh\", \"-c\", {script:?}]\n"
    )
}

#[test]
fn e2e_a_v2_whose_readiness_answers_500_is_reverted_to_v1_which_serves_again() {
    ank_tests::require_podman();
    let agent = format!("e2e_gate_web_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    // v1 is gated too: `--wait` returns when its gate passed, so it is the healthy spec to go back to.
    let o = c.ank_stdin(&["--wait", "apply", "-"], Some(&web(&agent, "v1", "200 OK")));
    assert!(o.status.success(), "apply v1 failed: {}", text(&o.stderr));

    // v2 runs (Running(Ok)) but answers 500 on its readiness path: it never becomes Ready.
    let began = Instant::now();
    let o = c.ank_stdin(&["--wait", "apply", "-"], Some(&web(&agent, "v2", "500 Internal Server Error")));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the job of v2 fails: {err}");
    assert!(err.contains("web: update gate: generation 2 not Ready within 20s ("), "{err}");
    assert!(err.contains("500") && err.contains("put back generation 1"), "names the probe's answer: {err}");
    assert!(began.elapsed() >= Duration::from_secs(19), "not before the deadline: {:?}", began.elapsed());

    let o = c.ank(&["wait", "workload/web", "--for", "Ready", "--timeout", "30s"]);
    assert!(o.status.success(), "v1 not Ready again: {}", text(&o.stderr));
    let running: Vec<String> = c
        .containers()
        .iter()
        .filter(|ct| ct["State"] == "running")
        .map(|ct| ct["Id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(running.len(), 1, "one container runs: {running:?}");
    // The container that runs now is v1 and serves.
    let served = std::process::Command::new("podman")
        .args(["exec", &running[0], "sh", "-c", "wget -qO- http://127.0.0.1:8080/cgi-bin/ready"])
        .output()
        .expect("podman exec");
    assert_eq!(text(&served.stdout).trim(), "v1", "v1 serves again: {}", text(&served.stderr));

    let jobs = text(&c.ank(&["get", "jobs"]).stdout);
    let row = jobs.lines().find(|l| l.trim_start().starts_with('2')).unwrap_or_default();
    assert!(row.contains("Failed") && row.contains("update gate"), "{jobs}");
    let describe = text(&c.ank(&["describe", "workload", "web"]).stdout);
    eprintln!("{err}\n{jobs}\n{describe}");
    assert!(describe.contains("Reverted:") && describe.contains("put back generation 1"), "{describe}");
    assert!(
        describe.contains("Probes:") && describe.contains("readiness httpGet 127.0.0.1:8080/cgi-bin/ready"),
        "{describe}"
    );
}

#[test]
fn e2e_apply_flags_gate_a_manifest_without_update_and_revert_it() {
    ank_tests::require_podman();
    let agent = format!("e2e_gate_flags_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, "localhost/busybox:latest", "")));
    assert!(o.status.success(), "apply v1 failed: {}", text(&o.stderr));
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "60s"]);
    assert!(o.status.success(), "v1 not Ready: {}", text(&o.stderr));
    // The server learns v1 as the healthy spec at its next tick.
    std::thread::sleep(Duration::from_secs(2));

    // The manifest has no `update`: the flags of this one apply gate it.
    let v2 = manifest(&agent, "localhost/busybox:no-such-tag-flags", "");
    let args = ["--wait", "apply", "--healthy-deadline", "10s", "--min-healthy-time", "2s", "--auto-revert", "-"];
    let o = c.ank_stdin(&args, Some(&v2));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the job of v2 fails: {err}");
    assert!(
        err.contains("w: update gate: generation 2 not Ready within 10s (") && err.contains("put back generation 1")
    );
    let o = c.ank(&["wait", "workload/w", "--for", "Ready", "--timeout", "30s"]);
    assert!(o.status.success(), "v1 not Ready again: {}", text(&o.stderr));
    let state = text(&c.ank(&["get", "state", "desiredState.workloads.w.runtimeConfig"]).stdout);
    assert!(state.contains("localhost/busybox:latest"), "v1's spec is desired again: {state}");

    let o = c.ank_stdin(&["apply", "--healthy-deadline", "soon", "-"], Some(&v2));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("option '--healthy-deadline': 'soon' is not a duration"), "{err}");
}
