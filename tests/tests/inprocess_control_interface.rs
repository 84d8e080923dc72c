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

#[tokio::test]
// [itest->swdd~agent-create-control-interface-pipes-per-workload~1]
async fn itest_workload_reads_state_through_its_control_interface_within_its_rules() {
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

    let mut c = Commander::connect(&url).await;
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
    assert!(e.message.contains("'workloadStates'"), "{}", e.message);

    // Deleting the workload removes its pipes.
    c.delete(&["app"]).await;
    c.wait_for_state("app", "Removed").await;
    for _ in 0..100 {
        if !folder.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!folder.exists());
    stop.cancel();
}
