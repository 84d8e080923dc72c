//! In-process server + agent (FakeRuntime) with a workload that has
//! control-interface access: the test plays the workload on the real FIFOs
//! the agent creates, through the server and back.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ank_agent::control_interface::framing::{FrameDecoder, encode_frame};
use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_proto::ank_base as pb;
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use ank_tests::commander::Commander;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

const MANIFEST: &str = "apiVersion: v1
workloads:
  app:
    runtime: podman
    agent: agent_A
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"desiredState.workloads\"]
    runtimeConfig: |
      image: localhost/busybox:latest
  plain:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: localhost/busybox:latest
";

/// The workload's side of the two FIFOs.
struct Pipes {
    to_agent: pipe::Sender,
    from_agent: pipe::Receiver,
    decoder: FrameDecoder,
}

impl Pipes {
    fn open(folder: &Path) -> Self {
        let to_agent = pipe::OpenOptions::new().read_write(true).open_sender(folder.join("output")).unwrap();
        let from_agent = pipe::OpenOptions::new().read_write(true).open_receiver(folder.join("input")).unwrap();
        Self { to_agent, from_agent, decoder: FrameDecoder::default() }
    }

    async fn send(&mut self, m: ToAnkaiosEnum) {
        let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(m) }.encode_to_vec());
        self.to_agent.write_all(&bytes).await.unwrap();
    }

    async fn request(&mut self, id: &str, mask: &str) {
        let request = pb::Request {
            request_id: id.into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec![mask.into()],
                subscribe_for_events: false,
            })),
        };
        self.send(ToAnkaiosEnum::Request(request)).await;
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
}

/// An in-process server and agent `agent_A` on a fake runtime, and a
/// commander connected to the server.
struct Cluster {
    stop: CancellationToken,
    fake: Arc<FakeRuntime>,
    run_folder: tempfile::TempDir,
    c: Commander,
}

impl Cluster {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
        tokio::spawn(ank_server::run(initial, listener, stop.clone()));
        let fake = Arc::new(FakeRuntime::new());
        let mut runtimes = RuntimeRegistry::new();
        runtimes.register(fake.clone());
        let run_folder = tempfile::tempdir().unwrap();
        let config =
            AgentConfig { run_folder: run_folder.path().to_path_buf(), ..AgentConfig::new("agent_A", url.clone()) };
        tokio::spawn(ank_agent::run(config, runtimes, stop.clone()));
        let c = Commander::connect(&url).await;
        Self { stop, fake, run_folder, c }
    }
}

#[tokio::test(start_paused = true)]
// [itest->swdd~agent-create-control-interface-pipes-per-workload~1]
async fn itest_workload_reads_state_through_its_control_interface_within_its_rules() {
    let Cluster { stop, fake, run_folder, mut c } = Cluster::start().await;
    c.apply(MANIFEST).await;
    c.wait_for_state("app", "Running(Ok)").await;
    c.wait_for_state("plain", "Running(Ok)").await;
    let created = fake.created();
    let app = created.iter().find(|n| n.workload_name == "app").unwrap();
    let plain = created.iter().find(|n| n.workload_name == "plain").unwrap();
    let folder = fake.options_of(app).unwrap().control_interface.expect("app gets a control interface");
    assert_eq!(folder, run_folder.path().join(format!("agent_A_io/app.{}/control_interface", app.id)));
    assert_eq!(fake.options_of(plain).unwrap().control_interface, None, "no allow rules, no pipes");

    let mut wl = Pipes::open(&folder);
    wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
    assert!(matches!(wl.receive().await, FromAnkaiosEnum::ControlInterfaceAccepted(_)));
    wl.request("r1", "desiredState.workloads.plain").await;
    let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("expected a response") };
    assert_eq!(r.request_id, "r1", "the prefix is stripped");
    let Some(pb::response::ResponseContent::CompleteStateResponse(cs)) = r.response_content else {
        panic!("expected the state")
    };
    let workloads = cs.complete_state.unwrap().desired_state.unwrap().workloads.unwrap().workloads;
    assert_eq!(workloads["plain"].runtime.as_deref(), Some("podman"));

    wl.request("r2", "workloadStates").await;
    let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("expected a response") };
    assert_eq!(r.request_id, "r2");
    let Some(pb::response::ResponseContent::Error(e)) = r.response_content else { panic!("expected a denial") };
    assert_eq!(e.message, "Access denied", "worded as by Ankaios");

    // Deleting the workload removes its pipes.
    c.delete(&["app"]).await;
    c.wait_for_state("app", "Removed").await;
    let gone = async || (!folder.exists()).then_some(());
    ank_tests::eventually("the pipes' folder removed", Duration::from_secs(2), gone).await;
    stop.cancel();
}

const FIVE: &str = "apiVersion: v1
workloads:
  good: &wl
    runtime: podman
    agent: agent_A
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: [\"desiredState.workloads\"]
    runtimeConfig: |
      image: localhost/busybox:latest
  huge: *wl
  overlong: *wl
  garbage: *wl
  unknown: *wl
";

async fn closed_reason(wl: &mut Pipes) -> String {
    loop {
        match wl.receive().await {
            FromAnkaiosEnum::ConnectionClosed(c) => return c.reason,
            FromAnkaiosEnum::ControlInterfaceAccepted(_) => continue,
            other => panic!("expected ConnectionClosed, got {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
// [itest->swdd~agent-uses-length-delimited-protobuf-for-pipes~1]
// [itest->swdd~agent-listens-for-requests-from-pipe~1]
async fn itest_bad_framing_closes_one_control_interface_undecodable_messages_are_skipped_and_the_others_keep_working() {
    let Cluster { stop, fake, run_folder: _run_folder, mut c } = Cluster::start().await;
    c.apply(FIVE).await;
    let mut pipes = std::collections::HashMap::new();
    for name in ["good", "huge", "overlong", "garbage", "unknown"] {
        c.wait_for_state(name, "Running(Ok)").await;
        let instance = fake.created().into_iter().find(|n| n.workload_name == name).unwrap();
        let folder = fake.options_of(&instance).unwrap().control_interface.unwrap();
        let mut wl = Pipes::open(&folder);
        wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        assert!(matches!(wl.receive().await, FromAnkaiosEnum::ControlInterfaceAccepted(_)), "{name}");
        pipes.insert(name, wl);
    }

    // A whole 10 MB frame: refused at its length prefix; the agent stops
    // reading, so the rest of the write stays pending (it is not awaited).
    let huge = pipes.get_mut("huge").unwrap();
    let frame = encode_frame(&vec![0x0a; 10 * 1024 * 1024]);
    let mut writer = pipe::OpenOptions::new().read_write(true).open_sender(fifo_of(&fake, "huge")).unwrap();
    let pending = tokio::spawn(async move { writer.write_all(&frame).await });
    assert!(closed_reason(huge).await.contains("exceeds the limit"));

    // A length prefix longer than any varint.
    let overlong = pipes.get_mut("overlong").unwrap();
    overlong.to_agent.write_all(&[0xff; 12]).await.unwrap();
    let reason = closed_reason(overlong).await;
    assert!(reason.starts_with("invalid frame"), "{reason}");

    // After the Hello, a well-framed message that is not protobuf, and a
    // ToAnkaios whose only field is one of a newer protocol (field 9), are
    // skipped as Ankaios skips them: the next request is answered.
    for (name, frame) in [("garbage", vec![0xff, 0xff, 0xff, 0x07]), ("unknown", vec![0x4a, 0x01, 0x00])] {
        let wl = pipes.get_mut(name).unwrap();
        wl.to_agent.write_all(&encode_frame(&frame)).await.unwrap();
        let request = pb::Request {
            request_id: "after".into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec![format!("desiredState.workloads.{name}")],
                subscribe_for_events: false,
            })),
        };
        wl.send(ToAnkaiosEnum::Request(request)).await;
        let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("{name}: expected a response") };
        assert_eq!(r.request_id, "after", "{name}");
    }

    // The good workload still gets answers, even to a request written one
    // byte at a time.
    let good = pipes.get_mut("good").unwrap();
    let request = pb::Request {
        request_id: "slow".into(),
        request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
            field_mask: vec!["desiredState.workloads.good".into()],
            subscribe_for_events: false,
        })),
    };
    let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(ToAnkaiosEnum::Request(request)) }.encode_to_vec());
    for b in bytes {
        good.to_agent.write_all(&[b]).await.unwrap();
        tokio::task::yield_now().await;
    }
    let FromAnkaiosEnum::Response(r) = good.receive().await else { panic!("expected a response") };
    assert_eq!(r.request_id, "slow");
    assert!(matches!(r.response_content, Some(pb::response::ResponseContent::CompleteStateResponse(_))));
    // And the agent goes on reporting: deleting a broken one works.
    c.delete(&["garbage"]).await;
    c.wait_for_state("garbage", "Removed").await;
    pending.abort();
    stop.cancel();
}

fn fifo_of(fake: &FakeRuntime, name: &str) -> std::path::PathBuf {
    let instance = fake.created().into_iter().find(|n| n.workload_name == name).unwrap();
    fake.options_of(&instance).unwrap().control_interface.unwrap().join("output")
}

/// Ankaios' authorization suite's last case through the real pipes: with
/// writing `desiredState.workloads.simple_existing` denied, a write below it
/// (its tags) is refused too, while reading it and writing elsewhere are not.
#[tokio::test(start_paused = true)]
async fn itest_a_denied_path_covers_the_paths_below_it() {
    const RULES: &str = "apiVersion: v1
workloads:
  controller:
    runtime: podman
    agent: agent_A
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [\"desiredState.workloads\"]
      denyRules:
        - type: StateRule
          operation: Write
          filterMasks: [\"desiredState.workloads.simple_existing\"]
    runtimeConfig: |
      image: localhost/busybox:latest
  simple_existing:
    runtime: podman
    agent: agent_A
    tags:
      owner: me
    runtimeConfig: |
      image: localhost/busybox:latest
";
    let Cluster { stop, fake, mut c, .. } = Cluster::start().await;
    c.apply(RULES).await;
    c.wait_for_state("controller", "Running(Ok)").await;
    let controller = fake.created().into_iter().find(|n| n.workload_name == "controller").unwrap();
    let folder = fake.options_of(&controller).unwrap().control_interface.unwrap();
    let mut wl = Pipes::open(&folder);
    wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
    assert!(matches!(wl.receive().await, FromAnkaiosEnum::ControlInterfaceAccepted(_)));

    let write = |id: &str, mask: &str| pb::Request {
        request_id: id.into(),
        request_content: Some(pb::request::RequestContent::UpdateStateRequest(pb::UpdateStateRequest {
            new_state: Some(pb::CompleteState::default()),
            update_mask: vec![mask.into()],
        })),
    };
    for (id, mask) in [("w1", "desiredState.workloads.simple_existing.tags"), ("w2", "desiredState")] {
        wl.send(ToAnkaiosEnum::Request(write(id, mask))).await;
        let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("expected a response") };
        assert_eq!(r.request_id, id);
        let Some(pb::response::ResponseContent::Error(e)) = r.response_content else { panic!("{mask} was allowed") };
        assert_eq!(e.message, "Access denied", "{mask}");
    }
    wl.request("r1", "desiredState.workloads.simple_existing.tags").await;
    let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("expected a response") };
    assert!(
        matches!(r.response_content, Some(pb::response::ResponseContent::CompleteStateResponse(_))),
        "reading is not denied: {r:?}"
    );
    let tags = c.complete_state(&["desiredState.workloads.simple_existing.tags"]).await;
    assert_eq!(tags["desiredState"]["workloads"]["simple_existing"]["tags"]["owner"], "me", "the tags are unchanged");
    stop.cancel();
}
