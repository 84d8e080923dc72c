//! In-process server with real mutating hooks (shell scripts written by
//! the tests and the `example-mutating-hook` binary of this crate), test
//! commanders and a plain agent stream: mutation, veto, timeout, crash,
//! garbage, ten hooks in prio order, dropped and kept workloads, and the
//! server answering others while a chain runs, queueing updates in order.
//! On the real clock: the hooks are processes, and their timeouts are real.

use std::path::Path;
use std::time::Duration;

use ank_common::messages::{FromServer, HookChange, RequestContent, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_server::hooks::{HookConfig, HooksRegistry};
use ank_tests::commander::Commander;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const EXAMPLE_HOOK: &str = env!("CARGO_BIN_EXE_example-mutating-hook");

fn hook(dir: &Path, name: &str, prio: u8) -> HookConfig {
    HookConfig { name: name.into(), prio, path: dir.to_path_buf(), timeout: Duration::from_secs(5) }
}

/// A shell hook `name` in `dir`.
fn script(dir: &Path, name: &str, prio: u8, body: &str) -> HookConfig {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    hook(dir, name, prio)
}

fn example_hook() -> HookConfig {
    let exe = Path::new(EXAMPLE_HOOK);
    hook(exe.parent().unwrap(), exe.file_name().unwrap().to_str().unwrap(), 10)
}

async fn start_server(hooks: Vec<HookConfig>) -> (String, CancellationToken) {
    start_server_with(ank_common::State { api_version: "v1".into(), ..Default::default() }, hooks).await
}

async fn start_server_with(initial: ank_common::State, hooks: Vec<HookConfig>) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let options = ank_server::grpc::ServeOptions { hooks: HooksRegistry::new(hooks), ..Default::default() };
    let (_handle, serving) = ank_server::start(initial, None, listener, options, shutdown.clone()).expect("start");
    tokio::spawn(serving);
    (url, shutdown)
}

type AgentStream =
    (tokio::sync::mpsc::Sender<ank_proto::grpc_api::ToServer>, tonic::Streaming<ank_proto::grpc_api::FromServer>);

/// An agent stream that said hello and got its ServerHello.
async fn agent(url: &str, name: &str) -> AgentStream {
    let (tx, mut inbound) = agent_raw(url, name).await;
    let first = inbound.message().await.unwrap().expect("a ServerHello");
    assert!(matches!(from_server_from_proto(first), Ok(Some(FromServer::ServerHello(_)))));
    (tx, inbound)
}

/// An agent stream that said hello; nothing read yet.
async fn agent_raw(url: &str, name: &str) -> AgentStream {
    use ank_proto::grpc_api::agent_connection_client::AgentConnectionClient;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let hello = ToServer::AgentHello {
        agent_name: name.into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: false,
        capabilities: Vec::new(),
        quota: Default::default(),
    };
    tx.send(to_server_to_proto(&hello)).await.unwrap();
    let mut client = AgentConnectionClient::connect(url.to_owned()).await.unwrap();
    let inbound = client.connect_agent(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    (tx, inbound)
}

/// The next UpdateWorkload the agent gets.
async fn next_update(inbound: &mut tonic::Streaming<ank_proto::grpc_api::FromServer>) -> FromServer {
    loop {
        let wire = tokio::time::timeout(Duration::from_secs(10), inbound.message()).await.unwrap().unwrap().unwrap();
        if let Ok(Some(msg @ FromServer::UpdateWorkload { .. })) = from_server_from_proto(wire) {
            return msg;
        }
    }
}

fn manifest(workloads: &[(&str, &str)]) -> String {
    let mut text = "apiVersion: v1\nworkloads:\n".to_owned();
    for (name, tag) in workloads {
        text.push_str(&format!(
            "  {name}:\n    runtime: podman\n    agent: agent_A\n    tags:\n      example_mutating_hook: {tag}\n    runtimeConfig: 'image: {name}'\n"
        ));
    }
    text
}

fn error_of(answer: ResponseContent) -> String {
    match answer {
        ResponseContent::Error(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn hooks_a_mutation_reaches_agent_and_effective_state_but_not_the_desired_state() {
    let (url, shutdown) = start_server(vec![example_hook()]).await;
    let (_keep, mut inbound) = agent(&url, "agent_A").await;
    let mut c = Commander::connect(&url).await;
    let text = manifest(&[("w", "update"), ("plain", "demo")]);
    // The answer says which hook changed which workloads (our extension).
    match c.apply(&text).await {
        ResponseContent::UpdateStateSuccess { hook_changes, .. } => assert_eq!(
            hook_changes,
            [HookChange { hook: example_hook().name, workloads: vec!["w".into()] }],
            "only 'w' asked to be changed"
        ),
        other => panic!("{other:?}"),
    }

    let FromServer::UpdateWorkload { added, .. } = next_update(&mut inbound).await else { unreachable!() };
    let tag =
        |name: &str| added.iter().find(|s| s.name() == name).unwrap().workload.tags["example_mutating_hook"].clone();
    assert_eq!((tag("w").as_str(), tag("plain").as_str()), ("marked", "demo"));
    let all = c.complete_state(&[]).await;
    assert_eq!(all["effectiveState"]["workloads"]["w"]["tags"]["example_mutating_hook"], "marked", "{all}");
    assert_eq!(all["desiredState"]["workloads"]["w"]["tags"]["example_mutating_hook"], "update", "{all}");

    // The same manifest again changes nothing: it is compared with the
    // rendering before the hooks, not with what they made of it.
    match c.apply(&text).await {
        ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, .. } => {
            assert!(added_workloads.is_empty() && deleted_workloads.is_empty(), "{added_workloads:?}")
        }
        other => panic!("{other:?}"),
    }
    // Another workload changes; the earlier mutation stays.
    c.apply(&manifest(&[("other", "update")])).await;
    let effective = c.complete_state(&["effectiveState.workloads"]).await;
    let tags = |n: &str| effective["effectiveState"]["workloads"][n]["tags"]["example_mutating_hook"].clone();
    assert_eq!((tags("w"), tags("other")), (json!("marked"), json!("marked")), "{effective}");
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_a_veto_refuses_the_whole_update_with_ankaios_text() {
    let (url, shutdown) = start_server(vec![example_hook()]).await;
    let mut c = Commander::connect(&url).await;
    let name = Path::new(EXAMPLE_HOOK).file_name().unwrap().to_str().unwrap().to_owned();
    let e = error_of(c.apply(&manifest(&[("fine", "demo"), ("bad", "reject")])).await);
    assert_eq!(
        e,
        format!(
            "Update rejected by mutating hook '{name}': 'Hook '{name}' rejected the change: \
             Reject input workloads due to the presence of \"example_mutating_hook: reject\" tag on workload 'bad''"
        )
    );
    let all = c.complete_state(&["desiredState.workloads"]).await;
    assert!(all["desiredState"].get("workloads").is_none_or(|w| w.as_object().is_some_and(|m| m.is_empty())), "{all}");
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_timeout_crash_and_garbage_refuse_naming_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let mut hang = script(dir.path(), "hang", 0, "exec sleep 600");
    hang.timeout = Duration::from_millis(200);
    let cases = [
        (hang, "Update rejected: 'Mutating hook 'hang' execution failed: 'no answer within 200 ms; killed''".to_owned()),
        (
            script(dir.path(), "crash", 0, "echo 'segfault ahead' >&2\nkill -SEGV $$"),
            "Update rejected: 'Mutating hook 'crash' execution failed: 'Hook 'crash' was killed by signal 11: segfault ahead''"
                .to_owned(),
        ),
    ];
    for (hook, expected) in cases {
        let (url, shutdown) = start_server(vec![hook]).await;
        let mut c = Commander::connect(&url).await;
        assert_eq!(error_of(c.apply(&manifest(&[("w", "demo")])).await), expected);
        shutdown.cancel();
    }
    let garbage = script(dir.path(), "garbage", 0, "cat >/dev/null\necho 'bad bytes' >&2\nprintf '\\377\\377'");
    let (url, shutdown) = start_server(vec![garbage]).await;
    let mut c = Commander::connect(&url).await;
    let e = error_of(c.apply(&manifest(&[("w", "demo")])).await);
    assert!(e.contains("Failed to decode protobuf output from hook 'garbage'") && e.contains("bad bytes"), "{e}");
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_ten_hooks_run_in_prio_order_each_on_the_previous_answer() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("order.log");
    // Declared h0..h9 with falling priorities; h4 and h5 share one (their
    // declaration order stays).
    let prios = [90, 80, 70, 60, 50, 50, 40, 30, 20, 10];
    let hooks: Vec<HookConfig> = prios
        .iter()
        .enumerate()
        .map(|(i, prio)| script(dir.path(), &format!("h{i}"), *prio, &format!("echo h{i} >> '{}'\ncat", log.display())))
        .collect();
    let (url, shutdown) = start_server(hooks).await;
    let mut c = Commander::connect(&url).await;
    // They all answer what they got: none changed anything.
    match c.apply(&manifest(&[("w", "demo")])).await {
        ResponseContent::UpdateStateSuccess { hook_changes, .. } => assert_eq!(hook_changes, []),
        other => panic!("{other:?}"),
    }
    let order: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(order, ["h9", "h8", "h7", "h6", "h4", "h5", "h3", "h2", "h1", "h0"]);
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_a_dropped_workload_is_not_deployed_and_a_kept_one_is_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("drop");
    // With the flag: answers an empty UpdateWorkload (drops everything).
    let body = format!("if [ -e '{}' ]; then cat >/dev/null; else cat; fi", flag.display());
    let (url, shutdown) = start_server(vec![script(dir.path(), "dropper", 0, &body)]).await;
    let mut c = Commander::connect(&url).await;
    c.apply(&manifest(&[("kept", "demo")])).await;
    std::fs::write(&flag, "").unwrap();
    assert!(matches!(c.apply(&manifest(&[("dropped", "demo")])).await, ResponseContent::UpdateStateSuccess { .. }));
    assert!(matches!(c.delete(&["kept"]).await, ResponseContent::UpdateStateSuccess { .. }));
    let all = c.complete_state(&["desiredState.workloads", "effectiveState.workloads"]).await;
    let names = |part: &str| {
        all[part]["workloads"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default()
    };
    assert_eq!(names("desiredState"), ["dropped"], "{all}");
    assert_eq!(names("effectiveState"), ["kept"], "{all}");
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_others_are_served_while_a_chain_runs_and_updates_queue_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let release = dir.path().join("release");
    let body = format!("while [ ! -e '{}' ]; do sleep 0.02; done\ncat", release.display());
    let (url, shutdown) = start_server(vec![script(dir.path(), "gate", 0, &body)]).await;
    let mut c = Commander::connect(&url).await;
    let mask = |n: &str| vec![format!("desiredState.workloads.{n}")];
    let state = |text: &str| {
        ank_tests::typed_state(json!({ "desiredState": ank_common::manifest::parse_manifest("t", text).unwrap() }))
    };
    // First adds w1; second replaces the whole state by w2: applied in
    // order, w1 is gone at the end.
    let first = c
        .send_request(RequestContent::UpdateState {
            new_state: state(&manifest(&[("w1", "demo")])),
            update_mask: mask("w1"),
        })
        .await;
    let second = c
        .send_request(RequestContent::UpdateState {
            new_state: state(&manifest(&[("w2", "demo")])),
            update_mask: vec![],
        })
        .await;
    // Answered while the first chain waits (and after this stream's two
    // updates reached the server: one stream is handled in order).
    let read = c
        .send_request(RequestContent::CompleteState {
            field_mask: vec!["desiredState.workloads".into()],
            subscribe_for_events: false,
        })
        .await;
    let ResponseContent::CompleteState(now) = c.response_to(&read).await else { panic!("a complete state") };
    let now = now.to_json().unwrap();
    let none = now["desiredState"].get("workloads").is_none_or(|w| w.as_object().is_some_and(|m| m.is_empty()));
    assert!(none, "nothing applied yet: {now}");
    let mut other = Commander::connect(&url).await;
    let _ = other.complete_state(&[]).await;

    std::fs::write(&release, "").unwrap();
    assert!(matches!(c.response_to(&first).await, ResponseContent::UpdateStateSuccess { .. }));
    assert!(matches!(c.response_to(&second).await, ResponseContent::UpdateStateSuccess { .. }));
    let end = c.complete_state(&["desiredState.workloads"]).await;
    let names: Vec<&String> = end["desiredState"]["workloads"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["w2"], "{end}");
    shutdown.cancel();
}

#[tokio::test]
async fn hooks_the_state_the_server_starts_with_goes_through_the_hooks() {
    let initial = ank_common::manifest::parse_manifest("t", &manifest(&[("w", "update")])).unwrap();
    let (url, shutdown) = start_server_with(initial, vec![example_hook()]).await;
    let mut c = Commander::connect(&url).await;
    // The chain runs once the server's loop does; poll until it answered.
    let marked = async || {
        let effective = c.complete_state(&["effectiveState.workloads.w.tags"]).await;
        (effective["effectiveState"]["workloads"]["w"]["tags"]["example_mutating_hook"] == "marked").then_some(())
    };
    ank_tests::eventually("the hook's tag in the effective state", Duration::from_secs(4), marked).await;
    let (_keep, mut inbound) = agent_raw(&url, "agent_A").await;
    let wire = inbound.message().await.unwrap().expect("a ServerHello");
    let Ok(Some(FromServer::ServerHello(specs))) = from_server_from_proto(wire) else { panic!("a ServerHello") };
    assert_eq!(specs[0].workload.tags["example_mutating_hook"], "marked", "a connecting agent gets the hooked spec");
    shutdown.cancel();
}
