//! Real-podman tests of the podman runtime connector: create, the events
//! watcher's Running / Failed / Succeeded, labels, list and delete. They
//! need podman and the `localhost/busybox:latest` image (tools/setup.sh);
//! without podman they fail, they never skip.

use std::process::Command;
use std::time::Duration;

use ank_agent::runtime_connectors::podman::{PodmanCli, PodmanRuntime};
use ank_agent::runtime_connectors::{
    CreateOptions, Observed, RuntimeConnector, RuntimeError, RuntimeEvent, RuntimeFailure,
};
use ank_common::execution_state::Failed;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadInstanceName, WorkloadName};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const IMAGE: &str = "localhost/busybox:latest";
const WAIT: Duration = Duration::from_secs(30);

fn require_podman() {
    let ok = Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "podman not found: run tools/setup.sh");
}

/// Removes every container of the test's agent, also when the test fails.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let filter = format!("label=agent={}", self.0);
        if let Ok(out) = Command::new("podman").args(["ps", "-aq", "--filter", &filter]).output() {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("podman").args(["rm", "-f", "-t", "0", id]).output();
            }
        }
    }
}

struct Setup {
    agent: String,
    runtime: PodmanRuntime,
    events: mpsc::Receiver<RuntimeEvent>,
    shutdown: CancellationToken,
    _cleanup: Cleanup,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn setup(test: &str) -> Setup {
    require_podman();
    let agent = format!("ptest_{test}_{}", std::process::id());
    let cleanup = Cleanup(agent.clone());
    let runtime = PodmanRuntime::new(PodmanCli { stop_timeout_secs: 1, ..PodmanCli::default() });
    let (tx, events) = mpsc::channel(256);
    let shutdown = CancellationToken::new();
    runtime.start_state_watcher(&agent, tx, shutdown.clone()).await.expect("podman events starts");
    Setup { agent, runtime, events, shutdown, _cleanup: cleanup }
}

fn spec(agent: &str, name: &str, args: &str) -> WorkloadSpec {
    let wl = Workload {
        agent: agent.into(),
        runtime: "podman".into(),
        runtime_config: format!("image: {IMAGE}\ncommandArgs: {args}\n"),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(agent).unwrap(), wl)
}

impl Setup {
    /// Waits for an event of `instance` that satisfies `want`.
    async fn wait_event(&mut self, instance: &WorkloadInstanceName, want: impl Fn(&Observed) -> bool) -> Observed {
        let fut = async {
            loop {
                match self.events.recv().await.expect("watcher alive") {
                    RuntimeEvent::Changed { instance_name, observed, .. }
                        if &instance_name == instance && want(&observed) =>
                    {
                        return observed;
                    }
                    _ => {}
                }
            }
        };
        tokio::time::timeout(WAIT, fut)
            .await
            .unwrap_or_else(|_| panic!("no matching event for '{instance}' in {WAIT:?}"))
    }
}

fn is_state(kind: StateKind) -> impl Fn(&Observed) -> bool {
    move |o| matches!(o, Observed::State(s) if s.kind == kind)
}

fn podman(args: &[&str]) -> std::process::Output {
    Command::new("podman").args(args).output().expect("podman runs")
}

#[tokio::test]
// [stest->swdd~functions-required-by-runtime-connector~1]
// [stest->swdd~podman-implements-runtime-connector~1]
// [stest->swdd~podman-create-workload-returns-workload-id~1]
// [stest->swdd~podman-list-of-existing-workloads-uses-labels~1]
// [stest->swdd~podman-get-workload-id-uses-label~1]
// [stest->swdd~podman-uses-podman-cli~1]
async fn podman_runtime_create_runs_with_labels_and_delete_removes() {
    let mut s = setup("life").await;
    let w = spec(&s.agent, "sleeper", "[sleep, '1000']");
    let id = s.runtime.create(&w, &CreateOptions::default()).await.expect("create");
    s.wait_event(&w.instance_name, is_state(StateKind::Running)).await;

    let out = podman(&["inspect", "--format", "{{json .Config.Labels}}|{{.Name}}", &id.0]);
    let text = String::from_utf8_lossy(&out.stdout);
    let (labels, name) = text.trim().split_once('|').expect("inspect output");
    let labels: serde_json::Value = serde_json::from_str(labels).unwrap();
    assert_eq!(labels["name"], w.instance_name.to_string());
    assert_eq!(labels["agent"], s.agent.as_str());
    assert_eq!(name, w.instance_name.short_name());

    let listed = s.runtime.list_workloads(&s.agent).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].instance_name, w.instance_name);
    assert_eq!(listed[0].workload_id, id);
    assert_eq!(listed[0].state, ExecutionState::running());

    s.runtime.delete(&id).await.expect("delete");
    assert!(!podman(&["container", "exists", &id.0]).status.success(), "container still exists");
    s.wait_event(&w.instance_name, |o| o == &Observed::Gone).await;
    // deleting again is not an error
    s.runtime.delete(&id).await.expect("second delete");
}

#[tokio::test]
// [stest->swdd~podman-state-getter-maps-state~3]
// [stest->swdd~podman-start-checker-starts-podman-state-checker~1]
// [stest->swdd~podman-implements-runtime-state-getter~1]
// [stest->swdd~podman-state-getter-uses-podmancli~1]
async fn podman_runtime_exit_codes_become_failed_and_succeeded() {
    let mut s = setup("exit").await;
    let bad = spec(&s.agent, "bad", "[sh, -c, 'sleep 0.3; exit 3']");
    let good = spec(&s.agent, "good", "[sh, -c, 'sleep 0.3; exit 0']");
    s.runtime.create(&bad, &CreateOptions::default()).await.expect("create bad");
    s.runtime.create(&good, &CreateOptions::default()).await.expect("create good");
    let failed = s.wait_event(&bad.instance_name, is_state(StateKind::Failed(Failed::ExecFailed))).await;
    assert_eq!(failed, Observed::State(ExecutionState::failed("Exit code: '3'")));
    s.wait_event(&good.instance_name, is_state(StateKind::Succeeded)).await;

    // podman lists a container as "stopped" until its cleanup process has
    // run, which can be just after the event was read.
    let expected = [
        (bad.instance_name.clone(), ExecutionState::failed("Exit code: '3'")),
        (good.instance_name.clone(), ExecutionState::succeeded()),
    ];
    let mut listed = Vec::new();
    for _ in 0..50 {
        let list = s.runtime.list_workloads(&s.agent).await.expect("list");
        listed = expected
            .iter()
            .map(|(n, _)| (n.clone(), list.iter().find(|l| &l.instance_name == n).map(|l| l.state.clone())))
            .collect::<Vec<_>>();
        if listed.iter().zip(&expected).all(|((_, got), (_, want))| got.as_ref() == Some(want)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("podman ps never listed the final states: {listed:?}");
}

#[tokio::test]
// [stest->swdd~podman-create-workload-deletes-failed-container~1]
async fn podman_runtime_failed_run_reports_stderr_and_leaves_nothing() {
    let s = setup("fail").await;
    let mut w = spec(&s.agent, "broken", "[true]");
    w.workload.runtime_config = format!("image: {IMAGE}\ncommandOptions: ['--no-such-flag']\n");
    let err =
        tokio::time::timeout(WAIT, s.runtime.create(&w, &CreateOptions::default())).await.expect("create returns");
    match err {
        Err(RuntimeError::Create(failure)) => {
            // podman's own stderr, as a typed source that names the command.
            assert!(failure.message().contains("no-such-flag"), "{failure}");
            assert!(matches!(failure, RuntimeFailure::Podman(_)), "{failure:?}");
        }
        other => panic!("expected a create error, got {other:?}"),
    }
    let listed = s.runtime.list_workloads(&s.agent).await.expect("list");
    assert!(listed.is_empty(), "{listed:?}");
}

#[tokio::test]
async fn podman_runtime_mounts_workload_files_read_only() {
    use ank_agent::workload_files;
    use ank_common::workload::{File, FileContent};

    let mut s = setup("files").await;
    let folder = tempfile::tempdir().unwrap();
    let files = [
        File { mount_point: "/etc/app/greeting".into(), content: FileContent::Data("hello files".into()) },
        File { mount_point: "/data/bin".into(), content: FileContent::BinaryData("YmluYXJ5IQ==".into()) },
    ];
    let mounts = workload_files::prepare(folder.path(), &files).await.expect("files written");
    let w = spec(
        &s.agent,
        "files",
        r#"["sh", "-c", "cat /etc/app/greeting; echo; cat /data/bin; echo; echo x > /etc/app/greeting || echo READONLY"]"#,
    );
    let options = CreateOptions { control_interface: None, files: mounts };
    let id = s.runtime.create(&w, &options).await.expect("create");
    s.wait_event(&w.instance_name, is_state(StateKind::Succeeded)).await;
    let out = podman(&["logs", &id.0]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("hello files"), "{text}");
    assert!(text.contains("binary!"), "{text}");
    assert!(text.contains("READONLY"), "the mount must be read-only: {text}");
    assert_eq!(std::fs::read_to_string(folder.path().join("files/etc/app/greeting")).unwrap(), "hello files");
}

#[tokio::test]
async fn podman_runtime_logs_honour_tail_and_follow_and_stop_when_dropped() {
    use ank_agent::runtime_connectors::LogOptions;

    let mut s = setup("logs").await;
    // "late" comes 3 s after the start: time enough for the `--tail 2`
    // read below on a busy machine.
    let w =
        spec(&s.agent, "talker", r#"["sh", "-c", "echo l1; echo l2; echo l3 >&2; sleep 3; echo late; sleep 100000"]"#);
    let id = s.runtime.create(&w, &CreateOptions::default()).await.expect("create");
    s.wait_event(&w.instance_name, is_state(StateKind::Running)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut tail = s.runtime.logs(&id, &LogOptions { tail: Some(2), ..Default::default() }).await.expect("logs");
    let mut got = Vec::new();
    while let Some(line) = tokio::time::timeout(WAIT, tail.recv()).await.expect("lines") {
        got.push(line);
    }
    got.sort();
    assert_eq!(got, ["l2", "l3"], "the last two lines, stdout and stderr");

    let mut follow = s.runtime.logs(&id, &LogOptions { follow: true, ..Default::default() }).await.expect("logs");
    let mut seen = Vec::new();
    while !seen.iter().any(|l| l == "late") {
        seen.push(tokio::time::timeout(WAIT, follow.recv()).await.expect("a line").expect("stream open"));
    }
    drop(follow);
    // The `podman logs --follow` child is gone once the stream is dropped.
    let filter = format!("podman logs --follow {}", id.0);
    let mut gone = false;
    for _ in 0..50 {
        let out = Command::new("pgrep").args(["-f", &filter]).output().expect("pgrep");
        if !out.status.success() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "podman logs child still running");
}

#[tokio::test]
// [stest->swdd~podman-create-workload-starts-existing-workload~1]
async fn podman_runtime_start_runs_the_same_container_again_and_keeps_its_logs() {
    use ank_agent::runtime_connectors::LogOptions;

    let mut s = setup("start").await;
    // The container's file system is kept too: the second run counts 2.
    let w = spec(&s.agent, "rerun", r#"["sh", "-c", "echo x >> /runs; echo run-$(wc -l < /runs)"]"#);
    assert!(s.runtime.supports_start());
    let id = s.runtime.create(&w, &CreateOptions::default()).await.expect("create");
    s.wait_event(&w.instance_name, is_state(StateKind::Succeeded)).await;
    s.runtime.start(&w, &id).await.expect("podman start");
    // `podman start` returns once the container runs; it ends again at once.
    s.wait_event(&w.instance_name, is_state(StateKind::Succeeded)).await;

    let listed = s.runtime.list_workloads(&s.agent).await.expect("list");
    assert_eq!(listed.iter().map(|l| &l.workload_id).collect::<Vec<_>>(), [&id], "the same container, no second one");
    let mut logs = s.runtime.logs(&id, &LogOptions::default()).await.expect("logs");
    let mut lines = Vec::new();
    while let Some(line) = tokio::time::timeout(WAIT, logs.recv()).await.expect("lines") {
        lines.push(line);
    }
    assert_eq!(lines, ["run-1", "run-2"], "both runs' output, in the same container");

    // A container that is gone cannot be started: the agent then creates it anew.
    s.runtime.delete(&id).await.expect("delete");
    let e = s.runtime.start(&w, &id).await.expect_err("no container");
    assert!(matches!(e, RuntimeError::Create(_)), "{e:?}");
}
