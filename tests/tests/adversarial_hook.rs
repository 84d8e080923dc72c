//! Adversarial suite, trust boundary "mutating hook": an executable the
//! administrator configured, run by the server on every change of the
//! workloads. A hook may veto or change the change it is shown (that is
//! its job, as in Ankaios); this file lists what a broken or hostile hook
//! must NOT be able to do, one test each:
//!
//! 1. hang the server (it is killed at its timeout; others are served);
//! 2. crash the server (a hook crashing is a refusal);
//! 3. fill the server's memory with an endless answer;
//! 4. flood the error text and the log with its stderr;
//! 5. break the state with a dependency cycle;
//! 6. break the state with invalid workload or agent names;
//! 7. delete workloads that were not part of the change it was shown;
//! 8. change the desired state (what users wrote).
//!
//! After each refusal the server still answers and the state is as before.
//! Runs in-process with real hook processes (their timeouts are real).

use std::path::Path;
use std::time::Duration;

use ank_common::messages::ResponseContent;
use ank_proto::ank_base;
use ank_proto::grpc_api::{AddedWorkload, DeletedWorkload, UpdateWorkload};
use ank_server::hooks::{HookConfig, HooksRegistry};
use ank_tests::commander::Commander;
use prost::Message;
use tokio_util::sync::CancellationToken;

/// A shell hook `name` in `dir` with `timeout`.
fn script(dir: &Path, name: &str, body: &str, timeout: Duration) -> HookConfig {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    HookConfig { name: name.into(), prio: 0, path: dir.to_path_buf(), timeout }
}

/// A hook that passes everything through until `armed` exists, then runs
/// `body` instead.
fn armed_script(dir: &Path, name: &str, armed: &Path, body: &str, timeout: Duration) -> HookConfig {
    script(dir, name, &format!("if [ -e '{}' ]; then\n{body}\nelse cat; fi", armed.display()), timeout)
}

async fn start_server(hooks: Vec<HookConfig>) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let options = ank_server::grpc::ServeOptions { hooks: HooksRegistry::new(hooks), ..Default::default() };
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    let (_handle, serving) = ank_server::start(initial, None, listener, options, shutdown.clone()).expect("start");
    tokio::spawn(serving);
    (url, shutdown)
}

fn manifest(workloads: &[&str]) -> String {
    let mut text = "apiVersion: v1\nworkloads:\n".to_owned();
    for name in workloads {
        text.push_str(&format!(
            "  {name}:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: 'image: {name}'\n"
        ));
    }
    text
}

fn refusal(answer: ResponseContent) -> String {
    match answer {
        ResponseContent::Error(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn names(state: &serde_json::Value, part: &str) -> Vec<String> {
    state[part]["workloads"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// The server still answers, and desired and effective state hold exactly
/// `expected`.
async fn state_is(c: &mut Commander, expected: &[&str]) {
    let all = c.complete_state(&["desiredState.workloads", "effectiveState.workloads"]).await;
    assert_eq!(names(&all, "desiredState"), expected, "{all}");
    assert_eq!(names(&all, "effectiveState"), expected, "{all}");
}

/// A hook answer with one added workload `name` on `agent`, whose
/// dependencies are `deps`, and `deleted` in the deleted list.
fn answer(added: &[(&str, &str, &[&str])], deleted: &[&str]) -> Vec<u8> {
    let instance = |name: &str, agent: &str| ank_base::WorkloadInstanceName {
        workload_name: name.into(),
        agent_name: agent.into(),
        id: "0".repeat(64),
    };
    UpdateWorkload {
        added_workloads: added
            .iter()
            .map(|(name, agent, deps)| AddedWorkload {
                instance_name: Some(instance(name, agent)),
                workload: Some(ank_base::Workload {
                    agent: Some((*agent).into()),
                    runtime: Some("podman".into()),
                    runtime_config: Some(format!("image: {name}")),
                    dependencies: Some(ank_base::Dependencies {
                        dependencies: deps
                            .iter()
                            .map(|d| ((*d).to_owned(), ank_base::AddCondition::AddCondRunning as i32))
                            .collect(),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        deleted_workloads: deleted
            .iter()
            .map(|name| DeletedWorkload { instance_name: Some(instance(name, "agent_A")), ..Default::default() })
            .collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A hook that answers the bytes of `file` once `armed` exists.
fn answering(dir: &Path, armed: &Path, bytes: &[u8]) -> HookConfig {
    let file = dir.join("answer.bin");
    std::fs::write(&file, bytes).unwrap();
    armed_script(dir, "answerer", armed, &format!("cat >/dev/null\ncat '{}'", file.display()), Duration::from_secs(5))
}

#[tokio::test]
async fn a_hook_cannot_hang_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let hook = armed_script(dir.path(), "hang", &armed, "exec sleep 600", Duration::from_millis(300));
    let (url, shutdown) = start_server(vec![hook]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["before"])).await;
    std::fs::write(&armed, "").unwrap();
    let e = refusal(c.apply(&manifest(&["w"])).await);
    assert!(e.contains("Mutating hook 'hang' execution failed: 'no answer within 300 ms; killed'"), "{e}");
    state_is(&mut c, &["before"]).await;
    std::fs::remove_file(&armed).unwrap();
    assert!(matches!(c.apply(&manifest(&["w"])).await, ResponseContent::UpdateStateSuccess { .. }));
    shutdown.cancel();
}

#[tokio::test]
async fn a_hook_cannot_crash_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let hook = armed_script(dir.path(), "crash", &armed, "kill -SEGV $$", Duration::from_secs(5));
    let (url, shutdown) = start_server(vec![hook]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["before"])).await;
    std::fs::write(&armed, "").unwrap();
    let e = refusal(c.apply(&manifest(&["w"])).await);
    assert!(e.contains("was killed by signal 11"), "{e}");
    state_is(&mut c, &["before"]).await;
    shutdown.cancel();
}

/// 64 MiB of answer, then the hook lingers: the server stops reading at
/// the message limit and refuses at once instead of buffering all of it
/// (an endless answer would otherwise fill its memory until the timeout).
#[tokio::test]
async fn a_hook_cannot_fill_the_servers_memory_with_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let body = "cat >/dev/null\nhead -c 67108864 /dev/zero\nexec sleep 600";
    let hook = armed_script(dir.path(), "flood", &armed, body, Duration::from_secs(60));
    let (url, shutdown) = start_server(vec![hook]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["before"])).await;
    std::fs::write(&armed, "").unwrap();
    let e = tokio::time::timeout(Duration::from_secs(30), c.apply(&manifest(&["w"]))).await.expect("refused at once");
    let e = refusal(e);
    assert!(
        e.contains("Mutating hook 'flood' execution failed: 'its answer is larger than 4194304 bytes; killed'"),
        "{e}"
    );
    state_is(&mut c, &["before"]).await;
    shutdown.cancel();
}

/// 8 MB of stderr and a veto: the refusal quotes at most 64 KiB of it.
#[tokio::test]
async fn a_hook_cannot_flood_the_refusal_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let body = "cat >/dev/null\nhead -c 8000000 /dev/zero | tr '\\0' x >&2\nexit 1";
    let hook = armed_script(dir.path(), "noisy", &armed, body, Duration::from_secs(30));
    let (url, shutdown) = start_server(vec![hook]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["before"])).await;
    std::fs::write(&armed, "").unwrap();
    let e = refusal(c.apply(&manifest(&["w"])).await);
    assert!(
        e.starts_with("Update rejected by mutating hook 'noisy': 'Hook 'noisy' rejected the change: xxx"),
        "{}",
        &e[..200.min(e.len())]
    );
    assert!(e.contains("xxxx") && e.len() < 70 * 1024, "{} bytes", e.len());
    state_is(&mut c, &["before"]).await;
    shutdown.cancel();
}

#[tokio::test]
async fn a_hook_cannot_break_the_state_with_a_dependency_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let bytes = answer(&[("a", "agent_A", &["b"]), ("b", "agent_A", &["a"])], &[]);
    let (url, shutdown) = start_server(vec![answering(dir.path(), &armed, &bytes)]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["before"])).await;
    std::fs::write(&armed, "").unwrap();
    let e = refusal(c.apply(&manifest(&["a", "b"])).await);
    assert!(e.contains("dependency cycle"), "{e}");
    state_is(&mut c, &["before"]).await;
    shutdown.cancel();
}

#[tokio::test]
async fn a_hook_cannot_break_the_state_with_invalid_names() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    std::fs::write(&armed, "").unwrap();
    for (name, agent, what) in [("../evil", "agent_A", "../evil"), ("w", "../../etc", "../../etc"), ("w", "a b", "a b")]
    {
        let hook = answering(dir.path(), &armed, &answer(&[(name, agent, &[])], &[]));
        let (url, shutdown) = start_server(vec![hook]).await;
        let mut c = Commander::connect(&url).await;
        let e = refusal(c.apply(&manifest(&["w"])).await);
        assert!(e.contains(what) && e.contains("answerer"), "{name}/{agent}: {e}");
        state_is(&mut c, &[]).await;
        shutdown.cancel();
    }
}

/// The hook is shown the change of `w` only; listing `other` as deleted
/// does not remove it.
#[tokio::test]
async fn a_hook_cannot_delete_workloads_outside_the_change() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    let bytes = answer(&[("w", "agent_A", &[])], &["other"]);
    let (url, shutdown) = start_server(vec![answering(dir.path(), &armed, &bytes)]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&["other"])).await;
    std::fs::write(&armed, "").unwrap();
    assert!(matches!(c.apply(&manifest(&["other", "w"])).await, ResponseContent::UpdateStateSuccess { .. }));
    state_is(&mut c, &["other", "w"]).await;
    shutdown.cancel();
}

/// A mutation reaches the effective state only; what the user wrote stays.
#[tokio::test]
async fn a_hook_cannot_change_the_desired_state() {
    let dir = tempfile::tempdir().unwrap();
    let armed = dir.path().join("armed");
    std::fs::write(&armed, "").unwrap();
    let mut bytes = answer(&[("w", "agent_A", &[])], &[]);
    let mut decoded = UpdateWorkload::decode(bytes.as_slice()).unwrap();
    decoded.added_workloads[0].workload.as_mut().unwrap().runtime_config =
        Some("image: evil\ncommandOptions: [--privileged]".into());
    bytes = decoded.encode_to_vec();
    let (url, shutdown) = start_server(vec![answering(dir.path(), &armed, &bytes)]).await;
    let mut c = Commander::connect(&url).await;
    assert!(matches!(c.apply(&manifest(&["w"])).await, ResponseContent::UpdateStateSuccess { .. }));
    let all = c.complete_state(&["desiredState.workloads.w", "effectiveState.workloads.w"]).await;
    assert_eq!(all["desiredState"]["workloads"]["w"]["runtimeConfig"], "image: w", "{all}");
    assert_eq!(all["effectiveState"]["workloads"]["w"]["runtimeConfig"], "image: evil\ncommandOptions: [--privileged]");
    shutdown.cancel();
}
