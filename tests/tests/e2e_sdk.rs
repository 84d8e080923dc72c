//! The official Ankaios Python SDK (`ankaios-sdk` from PyPI, unchanged)
//! against the built binaries on real podman: a workload running
//! `tests/sdk/sdk_conformance.py` in `localhost/ankpy:latest` (built by
//! `tools/build-sdk-image.sh`) connects through its control interface,
//! reads and changes state, applies, changes and deletes a workload, sets
//! configs, requests logs, registers for events, and sees denied requests
//! fail. The script exits 0 only if every step passed. The same script
//! also runs as a `containerd` workload (the image imported into a
//! containerd namespace of the test's own; its child stays podman).

use std::process::Command;
use std::time::Duration;

use ank_tests::binaries::Cluster;
use ank_tests::containerd::Namespace;

const SDK_IMAGE: &str = "localhost/ankpy:latest";
const SCRIPT: &str = include_str!("../sdk/sdk_conformance.py");

/// The runtimes the SDK workload runs on.
#[derive(Clone, Copy, PartialEq)]
enum Runtime {
    Podman,
    Containerd,
}

/// The SDK workload on `runtime`. The options are podman's and nerdctl's
/// alike (`-e`); under containerd it has no network (`--net=none`): the
/// script talks only through the control interface FIFOs.
fn manifest(agent: &str, mode: &str, runtime: Runtime) -> String {
    let script: String = SCRIPT.lines().map(|l| format!("          {l}\n")).collect();
    let (runtime, net) = match runtime {
        Runtime::Podman => ("podman", ""),
        Runtime::Containerd => ("containerd", r#", "--net=none""#),
    };
    format!(
        r#"apiVersion: v1
workloads:
  sdk:
    runtime: {runtime}
    agent: {agent}
    restartPolicy: NEVER
    runtimeConfig: |
      image: {SDK_IMAGE}
      commandOptions: ["-e", "PYTHONPATH=/opt/sdk", "-e", "PYTHONUNBUFFERED=1"{net}]
      commandArgs: ["python3", "/app/sdk_conformance.py", "{agent}", "{mode}"]
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["desiredState"]
        - type: StateRule
          operation: Read
          filterMasks: ["workloadStates"]
        - type: LogRule
          workloadNames: ["child"]
      denyRules:
        - type: StateRule
          operation: Write
          filterMasks: ["desiredState.workloads.sdk"]
    files:
      - mountPoint: /app/sdk_conformance.py
        data: |
{script}"#
    )
}

fn require_sdk_image() {
    ank_tests::require_podman();
    let exists = Command::new("podman").args(["image", "exists", SDK_IMAGE]).status().is_ok_and(|s| s.success());
    assert!(exists, "image {SDK_IMAGE} not found: build it once with `bash tools/build-sdk-image.sh`");
}

/// Imports the SDK image from podman into `ns` (`podman save`, then
/// `ctr images import`).
fn import_sdk_image(ns: &Namespace) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tar = dir.path().join("ankpy.tar");
    let o = Command::new("podman").args(["save", SDK_IMAGE, "-o"]).arg(&tar).output().expect("podman save");
    assert!(o.status.success(), "podman save {SDK_IMAGE}: {}", String::from_utf8_lossy(&o.stderr));
    let o = ns.ctr(&["images", "import", &tar.display().to_string()]);
    assert!(o.status.success(), "ctr images import {SDK_IMAGE}: {}", String::from_utf8_lossy(&o.stderr));
}

/// What the SDK script printed so far: `podman logs` of its container, or
/// `ank logs sdk` for a containerd workload (podman does not see it).
fn sdk_output(c: &Cluster, runtime: Runtime) -> String {
    if runtime == Runtime::Containerd {
        let o = c.ank(&["logs", "sdk"]);
        return if o.status.success() {
            String::from_utf8_lossy(&o.stdout).into_owned()
        } else {
            format!("(no logs of sdk: {})", String::from_utf8_lossy(&o.stderr))
        };
    }
    let Some(id) = c
        .containers()
        .iter()
        .find(|ctr| ctr["Labels"]["name"].as_str().is_some_and(|n| n.starts_with("sdk.")))
        .and_then(|ctr| ctr["Id"].as_str().map(str::to_owned))
    else {
        return "(no sdk container)".into();
    };
    let out = Command::new("podman").args(["logs", &id]).output().expect("podman logs");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Waits until the SDK script printed `text` or ended; panics with its
/// output after 120 s.
fn wait_for_output(c: &Cluster, runtime: Runtime, text: &str) {
    let ended = |c: &Cluster| {
        c.workload_rows()
            .into_iter()
            .any(|(n, s)| n == "sdk" && (s.starts_with("Succeeded") || s.starts_with("Failed")))
    };
    let start = std::time::Instant::now();
    while !sdk_output(c, runtime).contains(text) && !ended(c) {
        if start.elapsed() > Duration::from_secs(120) {
            panic!(
                "the SDK script did not print '{text}' within 120 s; its output so far:\n{}",
                sdk_output(c, runtime)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
// [stest->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
// [stest->swdd~agent-adds-workload-prefix-id-control-interface-request~1]
// [stest->swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1]
// [stest->swdd~podman-create-workload-mounts-fifo-files~1]
fn e2e_official_python_sdk_works_through_the_control_interface() {
    require_sdk_image();
    let agent = format!("e2e_sdk_{}", std::process::id());
    let c = Cluster::start(&agent, None);
    run_all_steps(&c, &agent, Runtime::Podman);
}

#[test]
fn e2e_official_python_sdk_works_in_a_containerd_workload() {
    require_sdk_image();
    let ns = Namespace::new("sdk");
    import_sdk_image(&ns);
    let agent = format!("e2e_sdk_cd_{}", std::process::id());
    let c = Cluster::start_with(&agent, None, &["--containerd-namespace", &ns.name]);
    run_all_steps(&c, &agent, Runtime::Containerd);
    let ids = ns.ids("containers");
    assert!(ids.iter().any(|id| id.starts_with("sdk.")), "the SDK ran under containerd: {ids:?}");
}

/// Applies the SDK workload on `runtime` and checks that every step of the
/// script passed.
fn run_all_steps(c: &Cluster, agent: &str, runtime: Runtime) {
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(agent, "all", runtime)));
    assert!(o.status.success(), "apply failed: {}", String::from_utf8_lossy(&o.stderr));
    wait_for_output(c, runtime, "ALL OK");
    // The script prints ALL OK just before it exits.
    let state_of_sdk = |c: &Cluster| c.workload_rows().into_iter().find(|(n, _)| n == "sdk").map(|(_, s)| s);
    let start = std::time::Instant::now();
    while !state_of_sdk(c).is_some_and(|s| s.starts_with("Succeeded") || s.starts_with("Failed"))
        && start.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = sdk_output(c, runtime);
    let state = state_of_sdk(c);
    assert_eq!(state.as_deref(), Some("Succeeded(Ok)"), "the SDK script failed:\n{output}");
    assert!(output.contains("ALL OK"), "{output}");
    for step in [
        "connect",
        "get complete state",
        "apply manifest adding a workload",
        "wait for it to run",
        "read its execution state",
        "request logs",
        "register for events",
        "change a workload and see its event",
        "set and read configs",
        "delete a workload",
        "denied requests fail",
    ] {
        assert!(output.contains(&format!("ok {step}\n")), "step '{step}' missing:\n{output}");
    }
}

#[test]
fn e2e_python_sdk_reconnects_after_an_agent_restart() {
    require_sdk_image();
    let agent = format!("e2e_sdk_re_{}", std::process::id());
    let mut c = Cluster::start(&agent, None);
    let o = c.ank_stdin(&["apply", "-"], Some(&manifest(&agent, "reconnect", Runtime::Podman)));
    assert!(o.status.success(), "apply failed: {}", String::from_utf8_lossy(&o.stderr));
    wait_for_output(&c, Runtime::Podman, "waiting for an agent restart");
    c.kill_agent();
    // The SDK notices the agent is gone before the agent comes back.
    wait_for_output(&c, Runtime::Podman, "agent away");
    c.start_agent();
    wait_for_output(&c, Runtime::Podman, "ALL OK");
    c.wait_until(Duration::from_secs(30), |c| {
        c.workload_rows().into_iter().any(|(n, s)| n == "sdk" && s.starts_with("Succeeded"))
    });
    let output = sdk_output(&c, Runtime::Podman);
    assert!(output.contains("agent away") && output.contains("ok reconnect after an agent restart"), "{output}");
}
