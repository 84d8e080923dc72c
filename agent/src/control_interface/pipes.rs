//! [`ControlInterface`]: the task serving one workload's FIFOs. It reads
//! frames from `output` into the [`Session`], forwards authorized requests
//! to the server and writes replies and the server's responses to `input`.
//! Both ends are opened read-write, so neither open nor read waits for the
//! workload and a workload that closes and reopens its end just goes on.
//! A workload that does not take a write within the input pipe's limit
//! counts as gone ([`InputPipe`]): it cannot block the agent, and its open
//! streams are cancelled, as they are when the interface is stopped. The
//! pipes stay for the workload to reconnect.

use std::path::{Path, PathBuf};

use ank_common::messages::{Response, ToServer};
use ank_common::workload::ControlInterfaceAccess;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::authorizer::Authorizer;
use super::fifo;
use super::framing::FrameDecoder;
use super::input_pipe::InputPipe;
use super::session::{Action, Session, response_message};
use crate::probes::self_report::SelfReports;

/// Responses for one workload's `input` pipe (request ids without the
/// prefix); stopping ends the task.
#[derive(Debug, Clone)]
pub struct ControlInterfaceHandle {
    tx: mpsc::Sender<Response>,
    cancel: CancellationToken,
    folder: PathBuf,
}

impl ControlInterfaceHandle {
    /// Queues a response for the workload; false if the task is gone or
    /// the workload is that far behind.
    pub fn deliver(&self, response: Response) -> bool {
        self.tx.try_send(response).is_ok()
    }

    /// The host folder to mount at `/run/ankaios/control_interface`.
    pub fn folder(&self) -> &Path {
        &self.folder
    }

    /// Stops the task, cancelling the workload's streams; the FIFOs stay.
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
        self_reports: SelfReports,
    ) -> std::io::Result<ControlInterfaceHandle> {
        fifo::create_pipes(&folder)?;
        let (reader, writer) = fifo::open_pipes(&folder)?;
        let (tx, rx) = mpsc::channel(256);
        let cancel = CancellationToken::new();
        let session = Session::new(workload, Authorizer::new(access)).with_self_reports(self_reports);
        let input = InputPipe::new(writer, workload);
        tokio::spawn(serve(session, reader, input, rx, to_server, cancel.clone(), workload.to_owned()));
        Ok(ControlInterfaceHandle { tx, cancel, folder })
    }
}

async fn serve(
    mut session: Session,
    mut reader: pipe::Receiver,
    mut input: InputPipe,
    mut rx: mpsc::Receiver<Response>,
    to_server: mpsc::UnboundedSender<ToServer>,
    cancel: CancellationToken,
    workload: String,
) {
    let mut decoder = FrameDecoder::default();
    let mut reading = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => {
                run(session.cancel_streams(), &mut input, &to_server).await;
                break;
            }
            // [impl->swdd~agent-listens-for-requests-from-pipe~1]
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
                            reading &= run(actions, &mut input, &to_server).await;
                            break;
                        }
                    };
                    reading &= run(session.on_frame(&frame), &mut input, &to_server).await;
                }
            }
            Some(response) = rx.recv() => {
                session.on_response(&response);
                if !input.send(&response_message(&response)).await {
                    // [impl->swdd~agent-handles-control-interface-input-pipe-not-read~1]
                    run(session.cancel_streams(), &mut input, &to_server).await;
                }
            }
            else => break,
        }
    }
}

/// Carries out the session's actions; false once reading must stop.
async fn run(actions: Vec<Action>, input: &mut InputPipe, to_server: &mpsc::UnboundedSender<ToServer>) -> bool {
    let mut keep_reading = true;
    for action in actions {
        match action {
            Action::Reply(message) => {
                input.send(&message).await;
            }
            Action::Forward(request) => {
                let _ = to_server.send(ToServer::Request(request));
            }
            Action::StopReading => keep_reading = false,
        }
    }
    keep_reading
}

#[cfg(test)]
mod tests {
    use ank_common::messages::{RequestContent, Response, ResponseContent};
    use ank_common::workload::{AccessRule, ReadWrite};
    use ank_proto::ank_base as pb;
    use std::time::Duration;

    use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
    use prost::Message;
    use tokio::io::AsyncWriteExt;

    use super::super::framing::encode_frame;
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
    // [utest->swdd~agent-listens-for-requests-from-pipe~1]
    // [utest->swdd~agent-forward-request-from-control-interface-pipe-to-server~1]
    // [utest->swdd~agent-ensures-control-interface-output-pipe-read~1]
    async fn control_interface_serves_hello_requests_and_responses_over_real_fifos() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("app.abc/control_interface");
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["desiredState".into()] };
        let access = ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] };
        let (to_server, mut server) = mpsc::unbounded_channel();
        let handle = ControlInterface::start("app", folder.clone(), access, to_server, SelfReports::default()).unwrap();
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
        let handle =
            ControlInterface::start("lazy", folder.clone(), access, to_server, SelfReports::default()).unwrap();
        let mut wl = Workload::open(&folder);
        wl.send(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: "1.0.0".into() })).await;
        let subscribe = pb::Request {
            request_id: "sub".into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec!["workloadStates".into()],
                subscribe_for_events: true,
            })),
        };
        wl.send(ToAnkaiosEnum::Request(subscribe)).await;
        let Some(ToServer::Request(r)) = server.recv().await else { panic!("nothing forwarded") };
        assert_eq!(r.request_id, "lazy@sub");
        // Far more than a pipe holds, and the workload reads none of it.
        for i in 0..8 {
            let big =
                Response { request_id: format!("lazy@r{i}"), content: ResponseContent::Error("x".repeat(64 * 1024)) };
            assert!(handle.deliver(super::super::session::route_response(&big).unwrap().1));
        }
        // The workload counts as gone: its subscription is cancelled.
        let cancel = tokio::time::timeout(Duration::from_secs(30), server.recv()).await.expect("not blocked");
        let Some(ToServer::Request(r)) = cancel else { panic!("nothing forwarded") };
        assert_eq!((r.request_id.as_str(), r.content), ("lazy@sub", RequestContent::EventsCancel));
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
