//! The official Ankaios Python SDK (`ankaios-sdk` from PyPI, unchanged, in a
//! venv made by `tools/sdk-venv.sh`) against our in-process server and agent
//! (FakeRuntime), without a container: `tests/sdk/sdk_fifo_harness.py`
//! points the SDK's fixed control-interface folder at the FIFOs our agent
//! made for the workload `sdk` and runs the steps of
//! `tests/sdk/sdk_conformance.py` (the script the real-podman tier runs in
//! a container). The fake stands in for the containers: it "prints" the
//! `echo` of each child workload so the log step has a line to find.
//! On the real clock: the SDK runs in a Python process.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

const MANIFEST: &str = "apiVersion: v1
workloads:
  sdk:
    runtime: podman
    agent: agent_A
    restartPolicy: NEVER
    runtimeConfig: |
      image: localhost/ankpy:latest
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [\"desiredState\"]
        - type: StateRule
          operation: Read
          filterMasks: [\"workloadStates\"]
        - type: LogRule
          workloadNames: [\"child\"]
      denyRules:
        - type: StateRule
          operation: Write
          filterMasks: [\"desiredState.workloads.sdk\"]
";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// The venv's python with the SDK; panics (never skips) when the venv
/// cannot be built.
fn sdk_python() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(workspace().join("tools/sdk-venv.sh"))
        .output()
        .expect("run tools/sdk-venv.sh");
    assert!(
        out.status.success(),
        "tools/sdk-venv.sh could not provide the Python SDK (needs python3-venv and PyPI):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let python = workspace().join(String::from_utf8_lossy(&out.stdout).trim());
    assert!(python.exists(), "{} missing", python.display());
    python
}

/// The word a child's `sh -c '... echo WORD; ...'` command would print.
fn echoed_word(runtime_config: &str) -> Option<String> {
    let rest = &runtime_config[runtime_config.find("echo ")? + 5..];
    Some(rest.split([';', ' ', '\'', '"', '\n']).next()?.to_owned()).filter(|w| !w.is_empty())
}

/// Stands in for the child containers' output: once someone asks for the
/// logs of a `child` instance, it "prints" the word its command echoes
/// (read from the desired runtime config when the fake created it) every
/// 50 ms, as a container printing in a loop would. Printing only from the
/// request on, and more than once, leaves the SDK the moment it needs to
/// register its log campaign after the acceptance (both SDKs drop entries
/// that arrive before that, as they would from Ankaios).
async fn echo_children(url: String, fake: std::sync::Arc<ank_agent::runtime_connectors::fake::FakeRuntime>) {
    let mut c = Commander::connect(&url).await;
    let mut words = HashMap::new();
    loop {
        for instance in fake.created().into_iter().filter(|n| n.workload_name == "child") {
            if !words.contains_key(&instance) {
                let state = c.complete_state(&["desiredState.workloads.child"]).await;
                let config = state["desiredState"]["workloads"]["child"]["runtimeConfig"].as_str().unwrap_or_default();
                words.insert(instance.clone(), echoed_word(config));
            }
        }
        let requested: HashSet<_> = fake.log_requests().into_iter().map(|(instance, _)| instance).collect();
        for (instance, word) in &words {
            if let Some(word) = word.as_deref().filter(|_| requested.contains(instance)) {
                fake.push_log(instance, word).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the fake created `name` with its FIFOs and returns their folder.
async fn control_interface_of(cluster: &InProcess, name: &str) -> PathBuf {
    let pipes = async || {
        let created = cluster.fake.created().into_iter().find(|n| n.workload_name == name);
        let folder = created.and_then(|i| cluster.fake.options_of(&i)).and_then(|o| o.control_interface)?;
        (folder.join("input").exists() && folder.join("output").exists()).then_some(folder)
    };
    ank_tests::eventually(&format!("{name} created with a control interface"), Duration::from_secs(10), pipes).await
}

#[test]
fn echoed_word_reads_the_greeting_of_the_sdk_scripts_child() {
    let config = "image: localhost/busybox:latest\ncommandArgs: [sh, -c, 'trap \"exit 0\" TERM; echo hello-from-child; sleep 3600 & wait']\n";
    assert_eq!(echoed_word(config).as_deref(), Some("hello-from-child"));
    assert_eq!(echoed_word("image: x\n"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// [itest->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
// [itest->swdd~agent-adds-workload-prefix-id-control-interface-request~1]
// [itest->swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1]
async fn itest_official_python_sdk_runs_the_conformance_steps_on_our_control_interface() {
    let python = sdk_python();
    let cluster = InProcess::start().await;
    let mut c = Commander::connect(&cluster.url).await;
    c.apply(MANIFEST).await;
    let folder = control_interface_of(&cluster, "sdk").await;
    let echo = tokio::spawn(echo_children(cluster.url.clone(), cluster.fake.clone()));

    let run = tokio::process::Command::new(&python)
        .arg(workspace().join("tests/sdk/sdk_fifo_harness.py"))
        .arg(&folder)
        .arg("agent_A")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the SDK script finished within 120 s")
        .expect("run the SDK script");
    echo.abort();
    cluster.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!("stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the SDK script failed:\n{report}");
    for step in [
        "connect",
        "get complete state",
        "apply manifest adding a workload",
        "wait for it to run",
        "read its execution state",
        "request logs",
        "register for events",
        "event subscription starts with the current state",
        "change a workload and see its event",
        "set and read configs",
        "delete a workload",
        "denied requests fail",
    ] {
        assert!(stdout.contains(&format!("ok {step}\n")), "step '{step}' missing:\n{report}");
    }
    assert!(stdout.contains("ALL OK\n") && stdout.contains("NO SDK WARNINGS\n"), "{report}");
}
