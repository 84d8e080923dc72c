//! [`ControlInterface`]: the task serving one workload's FIFOs. It reads
//! frames from `output` into the [`Session`], forwards authorized requests
//! to the server and writes replies and the server's responses to `input`.
//! Both ends are opened read-write, so neither open nor read waits for the
//! workload and a workload that closes and reopens its end just goes on.
//! A write the workload does not take within [`WRITE_TIMEOUT`] is dropped:
//! a workload that does not read cannot block the agent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ank_common::messages::ToServer;
use ank_common::workload::ControlInterfaceAccess;
use ank_proto::control_api as ci;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::authorizer::Authorizer;
use super::fifo;
use super::framing::{FrameDecoder, encode_frame};
use super::session::{Action, Session};

/// How long a write to a workload's `input` may block.
pub const WRITE_TIMEOUT: Duration = Duration::from_millis(500);

/// Messages for one workload's `input` pipe; dropping it ends the task.
#[derive(Debug, Clone)]
pub struct ControlInterfaceHandle {
    tx: mpsc::Sender<ci::FromAnkaios>,
    cancel: CancellationToken,
    folder: PathBuf,
}

impl ControlInterfaceHandle {
    /// Queues a message for the workload; false if the task is gone.
    pub fn deliver(&self, message: ci::FromAnkaios) -> bool {
        self.tx.try_send(message).is_ok()
    }

    /// The host folder to mount at `/run/ankaios/control_interface`.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// Stops the task; the FIFOs stay.
    pub fn stop(&self) {
        self.cancel.cancel();
    }
}

/// The task of one workload's control interface.
pub struct ControlInterface;

impl ControlInterface {
    /// Creates the FIFOs in `folder` and starts serving them for `workload`.
    pub fn start(
        workload: &str,
        folder: PathBuf,
        access: ControlInterfaceAccess,
        to_server: mpsc::UnboundedSender<ToServer>,
    ) -> std::io::Result<ControlInterfaceHandle> {
        fifo::create_pipes(&folder)?;
        let reader = pipe::OpenOptions::new().read_write(true).open_receiver(fifo::output_pipe(&folder))?;
        let writer = pipe::OpenOptions::new().read_write(true).open_sender(fifo::input_pipe(&folder))?;
        let (tx, rx) = mpsc::channel(256);
        let cancel = CancellationToken::new();
        let session = Session::new(workload, Authorizer::new(access));
        tokio::spawn(serve(session, reader, writer, rx, to_server, cancel.clone(), workload.to_owned()));
        Ok(ControlInterfaceHandle { tx, cancel, folder })
    }
}

async fn serve(
    mut session: Session,
    mut reader: pipe::Receiver,
    mut writer: pipe::Sender,
    mut rx: mpsc::Receiver<ci::FromAnkaios>,
    to_server: mpsc::UnboundedSender<ToServer>,
    cancel: CancellationToken,
    workload: String,
) {
    let mut decoder = FrameDecoder::default();
    let mut reading = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            read = reader.read(&mut buf), if reading => {
                let n = match read {
                    Ok(0) => continue,
                    Ok(n) => n,
                    Err(e) => {
                        tracing::warn!("workload '{workload}': cannot read its control interface: {e}");
                        break;
                    }
                };
                decoder.push(&buf[..n]);
                loop {
                    let frame = match decoder.next_frame() {
                        Ok(Some(f)) => f,
                        Ok(None) => break,
                        Err(e) => {
                            // The stream cannot be resynchronized: say why and stop reading.
                            let actions = session.close(format!("invalid frame: {e}"));
                            reading &= run(actions, &mut writer, &to_server, &workload).await;
                            break;
                        }
                    };
                    reading &= run(session.on_frame(&frame), &mut writer, &to_server, &workload).await;
                }
            }
            Some(message) = rx.recv() => write(&mut writer, &message, &workload).await,
            else => break,
        }
    }
}

/// Carries out the session's actions; false once reading must stop.
async fn run(
    actions: Vec<Action>,
    writer: &mut pipe::Sender,
    to_server: &mpsc::UnboundedSender<ToServer>,
    workload: &str,
) -> bool {
    let mut keep_reading = true;
    for action in actions {
        match action {
            Action::Reply(message) => write(writer, &message, workload).await,
            Action::Forward(request) => {
                let _ = to_server.send(ToServer::Request(request));
            }
            Action::StopReading => keep_reading = false,
        }
    }
    keep_reading
}

// [impl->swdd~agent-forward-responses-to-control-interface-pipe~1]
// [impl->swdd~agent-handles-control-interface-input-pipe-not-read~1]
async fn write(writer: &mut pipe::Sender, message: &ci::FromAnkaios, workload: &str) {
    let bytes = encode_frame(&message.encode_to_vec());
    match tokio::time::timeout(WRITE_TIMEOUT, writer.write_all(&bytes)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("workload '{workload}': cannot write to its control interface: {e}"),
        Err(_) => tracing::warn!(
            "workload '{workload}' does not read its control interface; a message of {} bytes was dropped",
            bytes.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use ank_common::messages::{RequestContent, Response, ResponseContent};
    use ank_common::workload::{AccessRule, ReadWrite};
    use ank_proto::ank_base as pb;
    use ank_proto::control_api::{from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};

    use super::*;

    struct Workload {
        to_agent: pipe::Sender,
        from_agent: pipe::Receiver,
        decoder: FrameDecoder,
    }

    impl Workload {
        fn open(folder: &Path) -> Self {
            let to_agent = pipe::OpenOptions::new().read_write(true).open_sender(fifo::output_pipe(folder)).unwrap();
            let from_agent = pipe::OpenOptions::new().read_write(true).open_receiver(fifo::input_pipe(folder)).unwrap();
            Self { to_agent, from_agent, decoder: FrameDecoder::default() }
        }

        async fn send(&mut self, m: ToAnkaiosEnum) {
            let bytes = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(m) }.encode_to_vec());
            self.to_agent.write_all(&bytes).await.unwrap();
        }

        async fn receive(&mut self) -> FromAnkaiosEnum {
            let mut buf = [0u8; 4096];
            loop {
                if let Some(frame) = self.decoder.next_frame().unwrap() {
                    return ci::FromAnkaios::decode(frame.as_slice()).unwrap().from_ankaios_enum.unwrap();
                }
                let n = tokio::time::timeout(Duration::from_secs(5), self.from_agent.read(&mut buf))
                    .await
                    .expect("the agent answers")
                    .unwrap();
                self.decoder.push(&buf[..n]);
            }
        }
    }

    #[tokio::test]
    // [utest->swdd~agent-forward-responses-to-control-interface-pipe~1]
    async fn control_interface_serves_hello_requests_and_responses_over_real_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("app.abc/control_interface");
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["desiredState".into()] };
        let access = ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] };
        let (to_server, mut server) = mpsc::unbounded_channel();
        let handle = ControlInterface::start("app", folder.clone(), access, to_server).unwrap();
        let mut wl = Workload::open(&folder);

        wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        assert!(matches!(wl.receive().await, FromAnkaiosEnum::ControlInterfaceAccepted(_)));
        let request = pb::Request {
            request_id: "r1".into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec!["desiredState.workloads".into()],
                subscribe_for_events: false,
            })),
        };
        wl.send(ToAnkaiosEnum::Request(request)).await;
        let Some(ToServer::Request(forwarded)) = server.recv().await else { panic!("nothing forwarded") };
        assert_eq!(forwarded.request_id, "app@r1");
        assert!(matches!(forwarded.content, RequestContent::CompleteState { .. }));

        // The server's answer comes back without the prefix.
        let answer = Response { request_id: "app@r1".into(), content: ResponseContent::EventsCancelAccepted };
        let (workload, message) = super::super::session::route_response(&answer).unwrap();
        assert_eq!(workload, "app");
        assert!(handle.deliver(message));
        let FromAnkaiosEnum::Response(r) = wl.receive().await else { panic!("expected a response") };
        assert_eq!(r.request_id, "r1");

        // A length prefix of 10 MB: ConnectionClosed, reading stops.
        wl.to_agent.write_all(&encode_frame(&vec![0u8; 10 * 1024 * 1024])[..4]).await.unwrap();
        let FromAnkaiosEnum::ConnectionClosed(c) = wl.receive().await else { panic!("expected ConnectionClosed") };
        assert!(c.reason.contains("exceeds the limit"), "{}", c.reason);
        handle.stop();
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-handles-control-interface-input-pipe-not-read~1]
    async fn a_workload_that_does_not_read_cannot_block_its_control_interface() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("lazy.abc/control_interface");
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["*".into()] };
        let access = ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] };
        let (to_server, mut server) = mpsc::unbounded_channel();
        let handle = ControlInterface::start("lazy", folder.clone(), access, to_server).unwrap();
        let mut wl = Workload::open(&folder);
        wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        // Far more than a pipe holds, and the workload reads none of it.
        for i in 0..8 {
            let big =
                Response { request_id: format!("lazy@r{i}"), content: ResponseContent::Error("x".repeat(64 * 1024)) };
            assert!(handle.deliver(super::super::session::route_response(&big).unwrap().1));
        }
        // Its requests are still read and forwarded: the blocked writes gave up.
        let request = pb::Request {
            request_id: "later".into(),
            request_content: Some(pb::request::RequestContent::EventsCancelRequest(pb::EventsCancelRequest {})),
        };
        wl.send(ToAnkaiosEnum::Request(request)).await;
        let forwarded = tokio::time::timeout(Duration::from_secs(30), server.recv()).await.expect("not blocked");
        let Some(ToServer::Request(r)) = forwarded else { panic!("nothing forwarded") };
        assert_eq!(r.request_id, "lazy@later");
        handle.stop();
    }
}
