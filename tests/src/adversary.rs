//! Tools of the adversarial suites (`tests/tests/adversarial_*.rs`): a
//! throw-away PKI, an in-process server with mTLS or without, and a raw gRPC
//! stream that sends whatever messages a test chooses, in any order, on
//! any of the three services, as an attacker holding a certificate would.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ank_certs::{Ca, Role, Validity};
use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_common::tls::{PemSource, TlsSources};
use ank_proto::dial::ClientPem;
use ank_proto::grpc_api as g;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// How long a raw stream waits for an answer.
pub const WAIT: Duration = Duration::from_secs(10);

/// A CA and the certificates issued by it, as files in a temporary folder.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub ca: Ca,
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    pub fn new() -> Self {
        let pki = Self { dir: tempfile::tempdir().expect("temp dir"), ca: Ca::new("ankaios-ca").expect("CA") };
        std::fs::write(pki.dir.path().join("ca.pem"), pki.ca.cert_pem()).expect("write ca.pem");
        pki
    }

    /// Issues `<file>.pem` and `<file>-key.pem` with CN `cn` and the SAN DNS names `sans`.
    pub fn issue(&self, file: &str, role: Role, cn: &str, sans: &[&str]) -> TlsSources {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let issued = self.ca.issue(role, cn, &sans, Validity::Days(1)).expect("issue");
        let path = |suffix: &str| self.dir.path().join(format!("{file}{suffix}"));
        std::fs::write(path(".pem"), issued.cert_pem).expect("write cert");
        std::fs::write(path("-key.pem"), issued.key_pem).expect("write key");
        // keys 0600, as the PEM mode check (Ankaios' rule) asks
        std::fs::set_permissions(path("-key.pem"), std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("key mode 0600");
        TlsSources {
            ca: PemSource::File(self.dir.path().join("ca.pem")),
            crt: PemSource::File(path(".pem")),
            key: PemSource::File(path("-key.pem")),
        }
    }

    /// A client certificate (CN `cn`, SANs `sans`) as a client presents it.
    pub fn client(&self, cn: &str, sans: &[&str]) -> ClientPem {
        self.issue(cn, Role::Client, cn, sans).client_pem(false).expect("client pem")
    }
}

impl Pki {
    /// Writes `crl.pem`, a revocation list of the CA that revokes `revoked`
    /// (client certificates it issued); returns its path.
    pub fn revoke(&self, revoked: &[&ClientPem]) -> PathBuf {
        let pems: Vec<String> = revoked.iter().map(|p| String::from_utf8(p.crt.clone()).expect("PEM")).collect();
        let pems: Vec<&str> = pems.iter().map(String::as_str).collect();
        let crl = self.ca.revocation_list(&pems, 1, 1).expect("CRL");
        let path = self.dir.path().join("crl.pem");
        std::fs::write(&path, crl).expect("write crl.pem");
        path
    }
}

/// A server serving `initial` in-process; `pki` switches mTLS on (its
/// certificate names `ank-server`). Returns its URL and the token that
/// stops it.
pub async fn start_server(
    pki: Option<&Pki>,
    initial: ank_common::State,
    tweak: impl FnOnce(&mut ank_server::grpc::ServeOptions),
) -> (String, CancellationToken) {
    start_server_with_crl(pki, None, initial, tweak).await
}

/// [`start_server`] with the revocation list `crl` (`--crl_pem`).
pub async fn start_server_with_crl(
    pki: Option<&Pki>,
    crl: Option<PathBuf>,
    initial: ank_common::State,
    tweak: impl FnOnce(&mut ank_server::grpc::ServeOptions),
) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut options = ank_server::grpc::ServeOptions::default();
    let url = match pki {
        Some(pki) => {
            let server = pki.issue("server", Role::Server, "ank-server", &["ank-server"]);
            let tls = ank_server::grpc::tls::ServerTls::load_with_crl(server, crl).expect("server tls");
            options.tls = Some(Arc::new(tls));
            format!("https://{addr}")
        }
        None => format!("http://{addr}"),
    };
    tweak(&mut options);
    let shutdown = CancellationToken::new();
    let (_handle, serving) =
        ank_server::start(initial, None, listener, options, shutdown.clone()).expect("server starts");
    tokio::spawn(serving);
    (url, shutdown)
}

/// A desired state from manifest text.
pub fn state(manifest: &str) -> ank_common::State {
    ank_common::manifest::parse_manifest("test", manifest).expect("valid manifest")
}

/// The gRPC service a raw stream opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Agent,
    Cli,
    Command,
}

/// One open stream on which the test sends what it likes.
pub struct RawStream {
    tx: mpsc::Sender<g::ToServer>,
    inbound: tonic::Streaming<g::FromServer>,
    next_id: u64,
}

impl RawStream {
    /// Opens `service` at `url` (with `pem` over TLS) and sends `first`
    /// before the server answers the call: the stream, or the status the
    /// server refused it with.
    pub async fn open(
        url: &str,
        pem: Option<&ClientPem>,
        service: Service,
        first: &[ToServer],
    ) -> Result<Self, tonic::Status> {
        let endpoint = ank_proto::dial::endpoint(url, pem, WAIT, None).expect("endpoint");
        let channel = endpoint.connect().await.map_err(|e| tonic::Status::unavailable(format!("connect: {e:?}")))?;
        let (tx, rx) = mpsc::channel(64);
        for m in first {
            tx.send(to_server_to_proto(m)).await.expect("queue");
        }
        let rx = ReceiverStream::new(rx);
        let call = async {
            match service {
                Service::Agent => {
                    g::agent_connection_client::AgentConnectionClient::new(channel).connect_agent(rx).await
                }
                Service::Cli => g::cli_connection_client::CliConnectionClient::new(channel).connect_cli(rx).await,
                Service::Command => {
                    g::command_connection_client::CommandConnectionClient::new(channel).connect_command(rx).await
                }
            }
        };
        let inbound = tokio::time::timeout(WAIT, call).await.expect("the server answers the call")?.into_inner();
        Ok(Self { tx, inbound, next_id: 0 })
    }

    /// Opens a commander stream (CommandConnection) that says hello first.
    pub async fn commander(url: &str, pem: Option<&ClientPem>) -> Self {
        Self::open(url, pem, Service::Command, &[commander_hello()]).await.expect("commander stream")
    }

    /// Opens an agent stream that says hello as `agent` first.
    pub async fn agent(url: &str, pem: Option<&ClientPem>, agent: &str) -> Result<Self, tonic::Status> {
        Self::open(url, pem, Service::Agent, &[agent_hello(agent)]).await
    }

    /// Sends a message; false when the stream is gone.
    pub async fn send(&self, m: &ToServer) -> bool {
        self.tx.send(to_server_to_proto(m)).await.is_ok()
    }

    /// The next message; `Ok(None)` when the stream ended, the status when
    /// it failed. Panics if nothing comes within [`WAIT`].
    pub async fn recv(&mut self) -> Result<Option<FromServer>, tonic::Status> {
        loop {
            let wire = tokio::time::timeout(WAIT, self.inbound.message()).await.expect("a message or the end")?;
            let Some(wire) = wire else { return Ok(None) };
            if let Some(m) = from_server_from_proto(wire).expect("a valid message") {
                return Ok(Some(m));
            }
        }
    }

    /// Sends a request and returns its answer with every message that came
    /// before it; panics if the stream ends first.
    pub async fn request(&mut self, content: RequestContent) -> (ResponseContent, Vec<FromServer>) {
        self.next_id += 1;
        let request_id = format!("adv-{}", self.next_id);
        assert!(self.send(&ToServer::Request(Request { request_id: request_id.clone(), content })).await);
        let mut before = Vec::new();
        loop {
            match self.recv().await {
                Ok(Some(FromServer::Response(r))) if r.request_id == request_id => return (r.content, before),
                Ok(Some(m)) => before.push(m),
                other => panic!("stream ended before the answer to {request_id}: {other:?}"),
            }
        }
    }

    /// The complete state under `masks`, as JSON.
    pub async fn complete_state(&mut self, masks: &[&str]) -> serde_json::Value {
        let field_mask = masks.iter().map(|m| (*m).to_owned()).collect();
        match self.request(RequestContent::CompleteState { field_mask, subscribe_for_events: false }).await.0 {
            ResponseContent::CompleteState(state) => state.to_json().expect("a JSON tree"),
            other => panic!("no complete state: {other:?}"),
        }
    }

    /// The next message that `pick` selects, skipping the others; panics
    /// if the stream ends first.
    pub async fn recv_until<T>(&mut self, mut pick: impl FnMut(FromServer) -> Option<T>) -> T {
        loop {
            match self.recv().await {
                Ok(Some(m)) => {
                    if let Some(t) = pick(m) {
                        return t;
                    }
                }
                other => panic!("stream ended before the awaited message: {other:?}"),
            }
        }
    }

    /// Waits until the stream ends (`Ok`) or fails (`Err`), skipping messages.
    pub async fn ended(&mut self) -> Result<(), tonic::Status> {
        while self.recv().await?.is_some() {}
        Ok(())
    }
}

pub fn commander_hello() -> ToServer {
    ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.into() }
}

pub fn agent_hello(agent: &str) -> ToServer {
    ToServer::AgentHello {
        agent_name: agent.into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: Default::default(),
    }
}

/// An UpdateState request that replaces the workloads with those of `manifest`.
pub fn update(request_id: &str, manifest: &serde_json::Value, mask: &[&str]) -> ToServer {
    ToServer::Request(Request {
        request_id: request_id.into(),
        content: RequestContent::UpdateState {
            new_state: crate::typed_state(manifest.clone()),
            update_mask: mask.iter().map(|m| (*m).to_owned()).collect(),
        },
    })
}

/// The names of the workloads in the desired state of `tree`.
pub fn workload_names(tree: &serde_json::Value) -> Vec<String> {
    tree["desiredState"]["workloads"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}
