//! Adversarial suite, trust boundary "a workload over its control
//! interface": an in-process server and agent (fake runtime) run the
//! workload `ctl` with given access rules beside `secret` and `web`; the
//! test plays `ctl` on the real FIFOs the agent made and tries what a
//! workload must not be able to do. Each test is one "must not".

use std::path::Path;
use std::time::Duration;

use ank_agent::control_interface::framing::{FrameDecoder, encode_frame};
use ank_proto::ank_base as pb;
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

/// `ctl` with `rules` (its `controlInterfaceAccess` body, indented by 6),
/// and two workloads it may target.
fn manifest(rules: &str) -> String {
    format!(
        "apiVersion: v1
workloads:
  ctl:
    runtime: podman
    agent: agent_A
    controlInterfaceAccess:
{rules}
    runtimeConfig: |
      image: localhost/busybox:latest
  secret:
    runtime: podman
    agent: agent_A
    tags:
      owner: ops
    configs:
      c: password
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [\"{{{{c}}}}\"]
  web:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: localhost/busybox:latest
configs:
  password: s3cr3t
"
    )
}

/// The workload's side of its two FIFOs.
struct Workload {
    to_agent: pipe::Sender,
    from_agent: pipe::Receiver,
    decoder: FrameDecoder,
    next: u32,
}

impl Workload {
    fn open(folder: &Path) -> Self {
        let to_agent = pipe::OpenOptions::new().read_write(true).open_sender(folder.join("output")).unwrap();
        let from_agent = pipe::OpenOptions::new().read_write(true).open_receiver(folder.join("input")).unwrap();
        Self { to_agent, from_agent, decoder: FrameDecoder::default(), next: 0 }
    }

    async fn send(&mut self, m: ToAnkaiosEnum) {
        let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(m) }.encode_to_vec());
        self.to_agent.write_all(&bytes).await.unwrap();
    }

    async fn hello(&mut self) {
        self.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        assert!(matches!(self.receive().await, FromAnkaiosEnum::ControlInterfaceAccepted(_)));
    }

    async fn receive(&mut self) -> FromAnkaiosEnum {
        let mut buf = [0u8; 65536];
        loop {
            if let Some(frame) = self.decoder.next_frame().unwrap() {
                return ci::FromAnkaios::decode(frame.as_slice()).unwrap().from_ankaios_enum.unwrap();
            }
            let n = tokio::time::timeout(Duration::from_secs(10), self.from_agent.read(&mut buf))
                .await
                .expect("the agent answers")
                .unwrap();
            self.decoder.push(&buf[..n]);
        }
    }

    /// Sends a request and returns its response's content.
    async fn ask(&mut self, content: pb::request::RequestContent) -> pb::response::ResponseContent {
        self.next += 1;
        let id = format!("q{}", self.next);
        self.send(ToAnkaiosEnum::Request(pb::Request { request_id: id.clone(), request_content: Some(content) })).await;
        loop {
            match self.receive().await {
                FromAnkaiosEnum::Response(r) if r.request_id == id => return r.response_content.unwrap(),
                FromAnkaiosEnum::Response(_) => continue,
                other => panic!("expected the response to {id}, got {other:?}"),
            }
        }
    }

    async fn read(&mut self, masks: &[&str]) -> pb::response::ResponseContent {
        let masks = masks.iter().map(|m| (*m).to_owned()).collect();
        self.ask(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
            field_mask: masks,
            subscribe_for_events: false,
        }))
        .await
    }

    async fn write(&mut self, new_state: pb::CompleteState, masks: &[&str]) -> pb::response::ResponseContent {
        let masks = masks.iter().map(|m| (*m).to_owned()).collect();
        self.ask(pb::request::RequestContent::UpdateStateRequest(pb::UpdateStateRequest {
            new_state: Some(new_state),
            update_mask: masks,
        }))
        .await
    }
}

fn denied(r: &pb::response::ResponseContent) -> bool {
    matches!(r, pb::response::ResponseContent::Error(e) if e.message == "Access denied")
}

/// A new state with one workload `name` on agent_A running `config`.
fn state_with_workload(name: &str, config: &str) -> pb::CompleteState {
    let workload = pb::Workload {
        agent: Some("agent_A".into()),
        runtime: Some("podman".into()),
        runtime_config: Some(config.into()),
        ..Default::default()
    };
    pb::CompleteState {
        desired_state: Some(pb::State {
            api_version: "v1".into(),
            workloads: Some(pb::WorkloadMap { workloads: [(name.to_owned(), workload)].into() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Cluster {
    p: InProcess,
    c: Commander,
    ctl: Workload,
}

impl Cluster {
    /// The cluster with `ctl` under `rules`, connected and past its Hello
    /// when `hello`.
    async fn start(rules: &str, hello: bool) -> Self {
        let p = InProcess::start().await;
        let mut c = Commander::connect(&p.url).await;
        c.apply(&manifest(rules)).await;
        for name in ["ctl", "secret", "web"] {
            c.wait_for_state(name, "Running(Ok)").await;
        }
        let instance = p.fake.created().into_iter().find(|n| n.workload_name == "ctl").unwrap();
        let folder = p.fake.options_of(&instance).unwrap().control_interface.expect("ctl has a control interface");
        let mut ctl = Workload::open(&folder);
        if hello {
            ctl.hello().await;
        }
        Self { p, c, ctl }
    }

    async fn workload_names(&mut self) -> Vec<String> {
        let state = self.c.complete_state(&["desiredState.workloads"]).await;
        state["desiredState"]["workloads"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }

    fn id_of(&self, name: &str) -> String {
        self.p.fake.created().into_iter().find(|n| n.workload_name == name).unwrap().id
    }
}

const WRITE_TAGS_OF_ALL: &str = "      allowRules:
        - type: StateRule
          operation: Write
          filterMasks: [\"desiredState.workloads.*.tags\"]";

const ALL_BUT_SECRET: &str = "      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [\"*\"]
      denyRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [\"desiredState.workloads.secret\", \"desiredState.configs\"]";

#[tokio::test(start_paused = true)]
async fn must_not_write_outside_its_allow_rules() {
    let mut k = Cluster::start(WRITE_TAGS_OF_ALL, true).await;
    for mask in ["desiredState.workloads.web", "desiredState.workloads.evil", "desiredState", "agents.agent_A.tags"] {
        let r = k.ctl.write(state_with_workload("evil", "image: x"), &[mask]).await;
        assert!(denied(&r), "{mask}: {r:?}");
    }
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_write_a_denied_workload_or_below_or_above_it() {
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    for mask in [
        "desiredState.workloads.secret",
        "desiredState.workloads.secret.runtimeConfig",
        "desiredState.workloads.*",
        "desiredState.workloads",
        "desiredState",
    ] {
        let r = k.ctl.write(pb::CompleteState::default(), &[mask]).await;
        assert!(denied(&r), "{mask}: {r:?}");
    }
    let r = k.ctl.write(pb::CompleteState::default(), &[]).await;
    assert!(denied(&r), "an empty mask list writes the whole state: {r:?}");
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

/// High finding 2, first half: the server used to drop the empty segment
/// and replace the whole workloads map.
#[tokio::test(start_paused = true)]
async fn must_not_get_past_a_deny_with_an_empty_mask_segment() {
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    for mask in [
        "desiredState.workloads.",
        "desiredState..workloads",
        ".desiredState.workloads",
        "desiredState.workloads.secret.",
    ] {
        let r = k.ctl.write(pb::CompleteState::default(), &[mask]).await;
        assert!(denied(&r), "{mask}: {r:?}");
        let r = k.ctl.read(&[mask]).await;
        assert!(denied(&r), "reading {mask}: {r:?}");
    }
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

/// High finding 2, second half: under `desiredState.workloads.*.tags`, the
/// mask `desiredState.workloads..tags` used to create a workload `tags`
/// with any runtimeConfig on any agent.
#[tokio::test(start_paused = true)]
async fn must_not_create_a_workload_through_an_empty_segment_under_a_wildcard_rule() {
    let mut k = Cluster::start(WRITE_TAGS_OF_ALL, true).await;
    let evil = state_with_workload("tags", "image: x\ncommandOptions: [\"--privileged\"]\n");
    let r = k.ctl.write(evil.clone(), &["desiredState.workloads..tags"]).await;
    assert!(denied(&r), "{r:?}");
    // The allowed form of the same mask changes tags only.
    let r = k.ctl.write(evil, &["desiredState.workloads.web.tags"]).await;
    assert!(matches!(r, pb::response::ResponseContent::UpdateStateSuccess(_)), "{r:?}");
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_read_a_denied_workload_its_configs_or_what_includes_them() {
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    for masks in [
        &["desiredState.workloads.secret"][..],
        &["desiredState.workloads.secret.runtimeConfig"],
        &["desiredState.workloads.*"],
        &["desiredState.workloads.*.runtimeConfig"],
        &["desiredState.configs.password"],
        &["desiredState"],
        &[],
        &[""],
        &["desiredState.workloads.web", "desiredState.workloads.secret"],
    ] {
        let r = k.ctl.read(masks).await;
        assert!(denied(&r), "{masks:?}: {r:?}");
    }
    let r = k.ctl.read(&["desiredState.workloads.web"]).await;
    assert!(matches!(r, pb::response::ResponseContent::CompleteStateResponse(_)), "{r:?}");
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_read_the_rendered_secret_through_the_effective_state_or_a_subscription() {
    let rules = "      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"*\"]
      denyRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"desiredState.workloads.secret\", \"effectiveState.workloads.secret\", \"desiredState.configs\"]";
    let mut k = Cluster::start(rules, true).await;
    for mask in ["effectiveState.workloads.secret.runtimeConfig", "effectiveState", "effectiveState.workloads.*"] {
        let r = k.ctl.read(&[mask]).await;
        assert!(denied(&r), "{mask}: {r:?}");
    }
    let r = k
        .ctl
        .ask(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
            field_mask: vec!["desiredState.workloads.secret".into()],
            subscribe_for_events: true,
        }))
        .await;
    assert!(denied(&r), "a subscription is a read: {r:?}");
    k.p.stop();
}

/// Low finding: a mask deeper than or beside a denied execution-state field
/// used to return the whole execution state.
#[tokio::test(start_paused = true)]
async fn must_not_read_a_denied_execution_state_field_through_a_deeper_or_sibling_mask() {
    let rules = "      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"workloadStates\"]
      denyRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"workloadStates.*.secret.*.state\", \"workloadStates.*.*.*.additionalInfo\"]";
    let mut k = Cluster::start(rules, true).await;
    let secret = k.id_of("secret");
    let web = k.id_of("web");
    // Beside: subState comes with state, which is denied.
    let r = k.ctl.read(&[&format!("workloadStates.agent_A.secret.{secret}.subState")]).await;
    assert!(denied(&r), "{r:?}");
    // Deeper: selects nothing, not the whole execution state.
    let r = k.ctl.read(&[&format!("workloadStates.agent_A.web.{web}.state.x")]).await;
    let pb::response::ResponseContent::CompleteStateResponse(cs) = r else { panic!("{r:?}") };
    let states = cs.complete_state.unwrap_or_default().workload_states.unwrap_or_default();
    assert!(states.agent_state_map.is_empty(), "{states:?}");
    // Allowed: web's state and subState, without its additionalInfo.
    let r = k.ctl.read(&[&format!("workloadStates.agent_A.web.{web}.state")]).await;
    let pb::response::ResponseContent::CompleteStateResponse(cs) = r else { panic!("{r:?}") };
    let states = cs.complete_state.unwrap().workload_states.unwrap();
    let entry = &states.agent_state_map["agent_A"].wl_name_state_map["web"].id_state_map[&web];
    assert!(entry.execution_state_enum.is_some(), "{entry:?}");
    assert!(entry.additional_info.as_deref().unwrap_or_default().is_empty(), "{entry:?}");
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_send_requests_before_its_hello() {
    let mut k = Cluster::start(ALL_BUT_SECRET, false).await;
    let delete_web = pb::Request {
        request_id: "early".into(),
        request_content: Some(pb::request::RequestContent::UpdateStateRequest(pb::UpdateStateRequest {
            new_state: Some(pb::CompleteState::default()),
            update_mask: vec!["desiredState.workloads.web".into()],
        })),
    };
    k.ctl.send(ToAnkaiosEnum::Request(delete_web)).await;
    let FromAnkaiosEnum::ConnectionClosed(closed) = k.ctl.receive().await else { panic!("expected a close") };
    assert_eq!(closed.reason, "Initial Hello missing!");
    // Nothing after the close is read: a Hello no longer opens it.
    k.ctl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
    assert!(
        tokio::time::timeout(Duration::from_secs(5), k.ctl.receive()).await.is_err(),
        "a closed interface stays closed"
    );
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_pass_a_hello_of_another_major_version() {
    let mut k = Cluster::start(ALL_BUT_SECRET, false).await;
    k.ctl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "99.0.0".into() })).await;
    let FromAnkaiosEnum::ConnectionClosed(closed) = k.ctl.receive().await else { panic!("expected a close") };
    assert!(!closed.reason.is_empty());
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_make_the_agent_take_a_huge_frame() {
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    // A length prefix of 1 GiB: refused before anything is buffered.
    let mut prefix = Vec::new();
    prost::encoding::encode_varint(1 << 30, &mut prefix);
    k.ctl.to_agent.write_all(&prefix).await.unwrap();
    let FromAnkaiosEnum::ConnectionClosed(closed) = k.ctl.receive().await else { panic!("expected a close") };
    assert!(closed.reason.contains("exceeds the limit"), "{}", closed.reason);
    // The agent and the other workloads go on.
    assert_eq!(k.workload_names().await, ["ctl", "secret", "web"]);
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_break_the_agent_with_malformed_frames() {
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    // A frame that is no protobuf and an over-long varint length.
    k.ctl.to_agent.write_all(&encode_frame(&[0xff, 0xff, 0xff, 0x07])).await.unwrap();
    let r = k.ctl.read(&["desiredState.workloads.web"]).await;
    assert!(matches!(r, pb::response::ResponseContent::CompleteStateResponse(_)), "skipped, as Ankaios: {r:?}");
    k.ctl.to_agent.write_all(&[0xff; 12]).await.unwrap();
    let FromAnkaiosEnum::ConnectionClosed(closed) = k.ctl.receive().await else { panic!("expected a close") };
    assert!(closed.reason.starts_with("invalid frame"), "{}", closed.reason);
    k.c.delete(&["web"]).await;
    k.c.wait_for_state("web", "Removed").await;
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_read_logs_it_has_no_log_rule_for() {
    let rules = "      allowRules:
        - type: LogRule
          workloadNames: [\"web\"]
        - type: StateRule
          operation: Read
          filterMasks: [\"*\"]
      denyRules:
        - type: LogRule
          workloadNames: [\"sec*\"]";
    let mut k = Cluster::start(rules, true).await;
    let id = k.id_of("secret");
    let logs = |name: &str, id: &str| {
        pb::request::RequestContent::LogsRequest(pb::LogsRequest {
            workload_names: vec![pb::WorkloadInstanceName {
                workload_name: name.into(),
                agent_name: "agent_A".into(),
                id: id.into(),
            }],
            ..Default::default()
        })
    };
    let r = k.ctl.ask(logs("secret", &id)).await;
    assert!(denied(&r), "denied by name: {r:?}");
    let r = k.ctl.ask(logs("ctl", &k.id_of("ctl"))).await;
    assert!(denied(&r), "no rule, not even for its own logs: {r:?}");
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_rerun_or_interrupt_jobs_without_write_access() {
    let rules = "      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"*\"]";
    let mut k = Cluster::start(rules, true).await;
    for content in [
        pb::request::RequestContent::JobRerunRequest(pb::JobRerunRequest { failed_only: false }),
        pb::request::RequestContent::JobInterruptRequest(pb::JobInterruptRequest { job_id: 1 }),
    ] {
        let r = k.ctl.ask(content).await;
        assert!(denied(&r), "{r:?}");
    }
    k.p.stop();
}

#[tokio::test(start_paused = true)]
async fn must_not_escape_its_request_id_prefix() {
    // Request ids are prefixed with `ctl@` towards the server; an id
    // naming another workload's prefix still answers `ctl` only.
    let mut k = Cluster::start(ALL_BUT_SECRET, true).await;
    k.ctl
        .send(ToAnkaiosEnum::Request(pb::Request {
            request_id: "web@x".into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec!["desiredState.workloads.web".into()],
                subscribe_for_events: false,
            })),
        }))
        .await;
    let FromAnkaiosEnum::Response(r) = k.ctl.receive().await else { panic!("expected a response") };
    assert_eq!(r.request_id, "web@x", "answered to the sender, with its own id");
    k.p.stop();
}
