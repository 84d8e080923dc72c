//! The one gRPC stream `ank` holds to the server (`CommandConnection.
//! ConnectCommand`): hello, requests matched to their responses by request
//! id, and the workload-state updates the server pushes in between. Wire
//! types are converted to the domain messages of `ank_common` right here;
//! the commands only see [`RequestContent`], [`ResponseContent`] and
//! [`WorkloadState`]s. Messages are limited to [`MAX_MESSAGE_BYTES`] both
//! ways, as on the server: a request too large is refused here, naming its
//! size and the limit.
//!
//! [`MAX_MESSAGE_BYTES`]: ank_proto::MAX_MESSAGE_BYTES

use std::collections::VecDeque;
use std::time::Duration;

use ank_common::WorkloadState;
use ank_common::convert::ConvertError;
use ank_common::messages::{FromServer, PUSH_STATES_HEADER, Request, RequestContent, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_proto::grpc_api as g;
use ank_proto::limits::{MAX_MESSAGE_BYTES, MessageTooLarge, check_size};
use g::command_connection_client::CommandConnectionClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

/// How long the goodbye may take before the process exits anyway.
const GOODBYE_GRACE: Duration = Duration::from_millis(200);

/// What can go wrong talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("cannot use server URL '{url}': {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot connect to the server at {url}")]
    Connect {
        url: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("the server at {url} refused the command connection: {status}")]
    Refused { url: String, status: tonic::Status },
    #[error("timed out after {} ms waiting for {what} from the server", .after.as_millis())]
    Timeout { what: &'static str, after: Duration },
    #[error("the server closed the connection")]
    Closed,
    #[error("the connection to the server failed: {0}")]
    Stream(tonic::Status),
    #[error("the server sent an invalid message")]
    Invalid(#[from] ConvertError),
    #[error("the request cannot be sent: {0}")]
    TooLarge(MessageTooLarge),
}

/// An open command connection.
pub struct Connection {
    tx: Option<mpsc::Sender<g::ToServer>>,
    inbound: Streaming<g::FromServer>,
    response_timeout: Duration,
    /// State updates received while waiting for a response, oldest first.
    pushed: VecDeque<Vec<WorkloadState>>,
    /// Whether the server pushes workload states (ours, when asked; an
    /// Ankaios server never does).
    pushes_states: bool,
    next_request: u64,
    verbose: bool,
}

impl Connection {
    /// Connects to `url`, opens the stream and says hello. Each step is
    /// bounded by `response_timeout`.
    pub async fn connect(
        url: &str,
        tls: Option<&ank_proto::dial::ClientPem>,
        response_timeout: Duration,
        verbose: bool,
    ) -> Result<Self, ConnectionError> {
        Self::connect_asking_pushes(url, tls, response_timeout, verbose, true).await
    }

    /// [`Connection::connect`]; `ask_pushes: false` does not ask the server
    /// to push workload states, as a server of Ankaios never does (tests).
    pub async fn connect_asking_pushes(
        url: &str,
        tls: Option<&ank_proto::dial::ClientPem>,
        response_timeout: Duration,
        verbose: bool,
        ask_pushes: bool,
    ) -> Result<Self, ConnectionError> {
        let endpoint = ank_proto::dial::endpoint(url, tls, response_timeout, None)
            .map_err(|e| ConnectionError::InvalidUrl { url: url.to_owned(), reason: e.to_string() })?;
        let channel = match tokio::time::timeout(response_timeout, ank_proto::dial::connect(&endpoint, tls)).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(source)) => return Err(ConnectionError::Connect { url: url.to_owned(), source }),
            Err(_) => return Err(ConnectionError::Timeout { what: "the connection", after: response_timeout }),
        };
        let (tx, rx) = mpsc::channel(16);
        let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() };
        // The channel is fresh and has room, so this cannot fail or block.
        tx.try_send(to_server_to_proto(&hello)).map_err(|_| ConnectionError::Closed)?;
        let mut client = CommandConnectionClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        // Ankaios pushes commanders no workload states; ask this server for them.
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        if ask_pushes {
            request.metadata_mut().insert(PUSH_STATES_HEADER, tonic::metadata::MetadataValue::from_static("true"));
        }
        let response = tokio::time::timeout(response_timeout, client.connect_command(request))
            .await
            .map_err(|_| ConnectionError::Timeout { what: "the command stream", after: response_timeout })?
            .map_err(|status| ConnectionError::Refused { url: url.to_owned(), status })?;
        if verbose {
            eprintln!("connected to {url}");
        }
        let pushes_states = response.metadata().contains_key(PUSH_STATES_HEADER);
        Ok(Self {
            tx: Some(tx),
            inbound: response.into_inner(),
            response_timeout,
            pushed: VecDeque::new(),
            pushes_states,
            next_request: 1,
            verbose,
        })
    }

    /// Whether the server pushes workload states; if not, who follows them
    /// must read them.
    pub fn pushes_states(&self) -> bool {
        self.pushes_states
    }

    /// Sends a request and waits (at most the response timeout) for the
    /// response with its id. State updates arriving meanwhile are kept for
    /// [`Connection::next_state_update`].
    pub async fn request(&mut self, content: RequestContent) -> Result<ResponseContent, ConnectionError> {
        let request_id = self.new_request_id();
        if self.verbose {
            eprintln!("request {request_id}: {content:?}");
        }
        let msg = ToServer::Request(Request { request_id: request_id.clone(), content });
        self.send(&msg).await?;
        let after = self.response_timeout;
        let deadline = tokio::time::Instant::now() + after;
        loop {
            let next = tokio::time::timeout_at(deadline, self.receive())
                .await
                .map_err(|_| ConnectionError::Timeout { what: "the response", after })??;
            match next {
                FromServer::Response(r) if r.request_id == request_id => {
                    if self.verbose {
                        eprintln!("response {request_id}: {:?}", r.content);
                    }
                    return Ok(r.content);
                }
                FromServer::UpdateWorkloadState(states) => self.pushed.push_back(states),
                _ => {}
            }
        }
    }

    /// Sends a request whose answer is a stream of responses (logs) under
    /// `request_id`; read them with [`Connection::next_response`].
    pub async fn send_request(&mut self, request_id: &str, content: RequestContent) -> Result<(), ConnectionError> {
        if self.verbose {
            eprintln!("request {request_id}: {content:?}");
        }
        self.send(&ToServer::Request(Request { request_id: request_id.to_owned(), content })).await
    }

    /// A request id unique to this process and connection.
    pub fn new_request_id(&mut self) -> String {
        self.next_request += 1;
        format!("ank-{}-{}", std::process::id(), self.next_request - 1)
    }

    /// The next response to `request_id`, without a time limit (a log
    /// stream may be quiet for long).
    pub async fn next_response(&mut self, request_id: &str) -> Result<ResponseContent, ConnectionError> {
        loop {
            match self.receive().await? {
                FromServer::Response(r) if r.request_id == request_id => return Ok(r.content),
                // Not kept: a long stream would pile them up.
                _ => {}
            }
        }
    }

    /// The next batch of pushed workload states, oldest first; those kept
    /// while waiting for responses come before newer ones. Waits without
    /// limit.
    pub async fn next_state_update(&mut self) -> Result<Vec<WorkloadState>, ConnectionError> {
        if let Some(states) = self.pushed.pop_front() {
            return Ok(states);
        }
        loop {
            if let FromServer::UpdateWorkloadState(states) = self.receive().await? {
                return Ok(states);
            }
        }
    }

    /// Like [`Connection::next_state_update`], but `None` after `limit`.
    pub async fn next_state_update_within(
        &mut self,
        limit: std::time::Duration,
    ) -> Result<Option<Vec<WorkloadState>>, ConnectionError> {
        if let Some(states) = self.pushed.pop_front() {
            return Ok(Some(states));
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.receive()).await {
                Err(_) => return Ok(None),
                Ok(msg) => {
                    if let FromServer::UpdateWorkloadState(states) = msg? {
                        return Ok(Some(states));
                    }
                }
            }
        }
    }

    /// The oldest state update kept while waiting for a response, if any.
    pub fn take_pushed(&mut self) -> Option<Vec<WorkloadState>> {
        self.pushed.pop_front()
    }

    /// Says goodbye and waits briefly for the server to close the stream, so
    /// the goodbye is delivered before the process exits.
    pub async fn goodbye(mut self) {
        if self.send(&ToServer::Goodbye).await.is_err() {
            return;
        }
        self.tx = None;
        let _ = tokio::time::timeout(GOODBYE_GRACE, async { while let Ok(Some(_)) = self.inbound.message().await {} })
            .await;
    }

    async fn send(&mut self, msg: &ToServer) -> Result<(), ConnectionError> {
        let tx = self.tx.as_ref().ok_or(ConnectionError::Closed)?;
        let wire = to_server_to_proto(msg);
        // tonic would fail the whole stream on it, with a vaguer error.
        check_size(&wire).map_err(ConnectionError::TooLarge)?;
        tx.send(wire).await.map_err(|_| ConnectionError::Closed)
    }

    /// The next message this version understands.
    async fn receive(&mut self) -> Result<FromServer, ConnectionError> {
        loop {
            let wire = self.inbound.message().await.map_err(ConnectionError::Stream)?.ok_or(ConnectionError::Closed)?;
            if let Some(msg) = from_server_from_proto(wire)? {
                return Ok(msg);
            }
        }
    }
}
