//! The connector's side of the control interface: the two FIFOs the agent
//! made for it (`output` to write requests, `input` to read answers), the
//! `Hello`, requests by id, and one event subscription that says when the
//! state changed. [`ControlApi`] is the edge the connector's logic sees,
//! so its tests use a fake.
//!
//! The agent keeps both pipes open while it runs. When it restarts, `input`
//! reads end of file; [`FifoControl::reconnect`] then opens the pipes again
//! and sends a new `Hello`, as the official SDKs do.

use std::path::PathBuf;
use std::time::Duration;

use ank_common::convert::PartialCompleteState;
use ank_common::messages::{Request, RequestContent, ResponseContent};
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use ank_proto::framing::{FrameDecoder, encode_frame};
use async_trait::async_trait;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

/// Why a control-interface call failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ControlError {
    /// The pipes are gone or closed; reconnect.
    #[error("the control interface is not connected: {0}")]
    Disconnected(String),
    /// The agent or server answered with an error (for example `Access denied`).
    #[error("{0}")]
    Refused(String),
    #[error("no answer to request '{0}' within {1:?}")]
    Timeout(String, Duration),
    #[error("unexpected answer: {0}")]
    Unexpected(String),
}

/// What the connector asks of its vehicle.
#[async_trait]
pub trait ControlApi: Send {
    /// The complete state under `masks`.
    async fn complete_state(&mut self, masks: &[&str]) -> Result<PartialCompleteState, ControlError>;
    /// Applies an update; the job id it became (0 from a server without jobs).
    async fn update_state(&mut self, new_state: PartialCompleteState, mask: Vec<String>) -> Result<u64, ControlError>;
    /// Waits until the subscribed state changed (cancel-safe).
    async fn changed(&mut self) -> Result<(), ControlError>;
    /// Opens the interface again after [`ControlError::Disconnected`].
    async fn reconnect(&mut self) -> Result<(), ControlError>;
}

/// How long a request may wait for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// The id of the event subscription.
const EVENTS_ID: &str = "fleet-events";
/// What the subscription watches.
const EVENT_MASKS: [&str; 2] = ["workloadStates", "desiredState.workloads"];

/// The control interface over the agent's FIFOs.
pub struct FifoControl {
    folder: PathBuf,
    writer: Option<pipe::Sender>,
    incoming: Option<mpsc::Receiver<FromAnkaiosEnum>>,
    next_id: u64,
    changed: bool,
}

impl FifoControl {
    /// The interface in `folder` (in a container `/run/ankaios/control_interface`); not connected yet.
    pub fn new(folder: PathBuf) -> Self {
        Self { folder, writer: None, incoming: None, next_id: 0, changed: true }
    }

    async fn send(&mut self, message: ToAnkaiosEnum) -> Result<(), ControlError> {
        let writer = self.writer.as_mut().ok_or_else(|| ControlError::Disconnected("not open".into()))?;
        let frame = encode_frame(&ci::ToAnkaios { to_ankaios_enum: Some(message) }.encode_to_vec());
        writer.write_all(&frame).await.map_err(|e| self.lost(format!("writing output: {e}")))
    }

    fn lost(&mut self, why: String) -> ControlError {
        self.writer = None;
        self.incoming = None;
        ControlError::Disconnected(why)
    }

    async fn receive(&mut self) -> Result<FromAnkaiosEnum, ControlError> {
        let incoming = self.incoming.as_mut().ok_or_else(|| ControlError::Disconnected("not open".into()))?;
        match incoming.recv().await {
            Some(m) => Ok(m),
            None => Err(self.lost("the agent closed input".into())),
        }
    }

    /// Sends a request and waits for its answer, noting events meanwhile.
    async fn call(&mut self, content: RequestContent) -> Result<ResponseContent, ControlError> {
        self.next_id += 1;
        let id = format!("fleet-{}", self.next_id);
        let request = Request { request_id: id.clone(), content };
        self.send(ToAnkaiosEnum::Request(ank_common::messages::request_to_pb(&request))).await?;
        let wait = async {
            loop {
                match self.receive().await? {
                    FromAnkaiosEnum::Response(r) if r.request_id == id => {
                        let r = ank_common::messages::response_from_pb(r)
                            .map_err(|e| ControlError::Unexpected(e.to_string()))?;
                        return Ok(r.content);
                    }
                    FromAnkaiosEnum::Response(r) if r.request_id == EVENTS_ID => self.changed = true,
                    FromAnkaiosEnum::ConnectionClosed(c) => return Err(self.lost(c.reason)),
                    _ => {}
                }
            }
        };
        tokio::time::timeout(ANSWER_TIMEOUT, wait).await.map_err(|_| ControlError::Timeout(id, ANSWER_TIMEOUT))?
    }
}

/// Reads frames from `input` until end of file or a broken frame.
async fn read_input(mut input: pipe::Receiver, tx: mpsc::Sender<FromAnkaiosEnum>) {
    let mut decoder = FrameDecoder::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => match ci::FromAnkaios::decode(frame.as_slice()) {
                    Ok(ci::FromAnkaios { from_ankaios_enum: Some(m) }) => {
                        if tx.send(m).await.is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("undecodable message from the agent skipped: {e}"),
                },
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("the agent's input pipe is out of frame: {e}");
                    return;
                }
            }
        }
        match input.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => decoder.push(&buf[..n]),
        }
    }
}

#[async_trait]
impl ControlApi for FifoControl {
    async fn complete_state(&mut self, masks: &[&str]) -> Result<PartialCompleteState, ControlError> {
        let content = RequestContent::CompleteState {
            field_mask: masks.iter().map(|m| (*m).to_owned()).collect(),
            subscribe_for_events: false,
        };
        match self.call(content).await? {
            ResponseContent::CompleteState(state) => Ok(*state),
            ResponseContent::Error(e) => Err(ControlError::Refused(e)),
            other => Err(ControlError::Unexpected(format!("{other:?}"))),
        }
    }

    async fn update_state(&mut self, new_state: PartialCompleteState, mask: Vec<String>) -> Result<u64, ControlError> {
        let content = RequestContent::UpdateState { new_state: Box::new(new_state), update_mask: mask };
        match self.call(content).await? {
            ResponseContent::UpdateStateSuccess { job_id, .. } => Ok(job_id),
            ResponseContent::Error(e) => Err(ControlError::Refused(e)),
            other => Err(ControlError::Unexpected(format!("{other:?}"))),
        }
    }

    async fn changed(&mut self) -> Result<(), ControlError> {
        while !self.changed {
            match self.receive().await? {
                FromAnkaiosEnum::Response(r) if r.request_id == EVENTS_ID => self.changed = true,
                FromAnkaiosEnum::ConnectionClosed(c) => return Err(self.lost(c.reason)),
                _ => {}
            }
        }
        self.changed = false;
        Ok(())
    }

    async fn reconnect(&mut self) -> Result<(), ControlError> {
        self.writer = None;
        self.incoming = None;
        let open = |what: &str, e: std::io::Error| ControlError::Disconnected(format!("cannot open {what}: {e}"));
        let output = self.folder.join("output");
        let writer = pipe::OpenOptions::new().read_write(true).open_sender(&output).map_err(|e| open("output", e))?;
        let input = self.folder.join("input");
        let reader = pipe::OpenOptions::new().open_receiver(&input).map_err(|e| open("input", e))?;
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(read_input(reader, tx));
        self.writer = Some(writer);
        self.incoming = Some(rx);
        let hello = ci::Hello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() };
        self.send(ToAnkaiosEnum::Hello(hello)).await?;
        let accepted = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match self.receive().await? {
                    FromAnkaiosEnum::ControlInterfaceAccepted(_) => return Ok(()),
                    FromAnkaiosEnum::ConnectionClosed(c) => return Err(self.lost(c.reason)),
                    _ => {}
                }
            }
        });
        accepted.await.map_err(|_| self.lost("no answer to Hello".into()))??;
        let subscribe = Request {
            request_id: EVENTS_ID.to_owned(),
            content: RequestContent::CompleteState {
                field_mask: EVENT_MASKS.iter().map(|m| (*m).to_owned()).collect(),
                subscribe_for_events: true,
            },
        };
        self.send(ToAnkaiosEnum::Request(ank_common::messages::request_to_pb(&subscribe))).await?;
        self.changed = true;
        Ok(())
    }
}
