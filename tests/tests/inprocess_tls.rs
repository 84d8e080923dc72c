//! In-process server with mTLS and certificates made like Ankaios' own
//! (tools/certs/create_certs.sh): the server's certificate names only
//! `ank-server`, the agent's has the SAN `*`. Clients check the fixed name
//! `ank-server` whatever address they dial (checking the URL's host is
//! opt-in), agent names follow the SAN DNS names, and hellos with an
//! incompatible protocol version are refused with Ankaios' text.

use std::sync::Arc;
use std::time::Duration;

use ank_certs::{Ca, Role, Validity};
use ank_common::messages::{FromServer, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_common::tls::{PemSource, TlsSources};
use ank_proto::dial::ClientPem;
use ank_proto::grpc_api::agent_connection_client::AgentConnectionClient;
use ank_proto::grpc_api::command_connection_client::CommandConnectionClient;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
}

impl Pki {
    fn new() -> Self {
        let pki = Self { dir: tempfile::tempdir().unwrap(), ca: Ca::new("ankaios-ca").unwrap() };
        std::fs::write(pki.dir.path().join("ca.pem"), pki.ca.cert_pem()).unwrap();
        pki
    }

    /// Issues `<file>.pem` and `<file>-key.pem`.
    fn issue(&self, file: &str, role: Role, cn: &str, sans: &[&str]) -> TlsSources {
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let issued = self.ca.issue(role, cn, &sans, Validity::Days(1)).unwrap();
        let path = |suffix: &str| self.dir.path().join(format!("{file}{suffix}"));
        std::fs::write(path(".pem"), issued.cert_pem).unwrap();
        std::fs::write(path("-key.pem"), issued.key_pem).unwrap();
        // A private key must be 0600 or 0400, as Ankaios requires.
        std::fs::set_permissions(path("-key.pem"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        TlsSources {
            ca: PemSource::File(self.dir.path().join("ca.pem")),
            crt: PemSource::File(path(".pem")),
            key: PemSource::File(path("-key.pem")),
        }
    }
}

/// A server with mTLS whose certificate names only `ank-server`.
async fn start_server(pki: &Pki) -> (String, CancellationToken) {
    let server = pki.issue("server", Role::Server, "ank-server", &["ank-server"]);
    let tls = ank_server::grpc::tls::ServerTls::load(server).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let options = ank_server::grpc::ServeOptions { tls: Some(Arc::new(tls)), ..Default::default() };
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    let (_handle, serving) = ank_server::start(initial, None, listener, options, shutdown.clone()).unwrap();
    tokio::spawn(serving);
    (url, shutdown)
}

use ank_tests::adversary::agent_hello as hello;

/// Connects as an agent with `pem` and says hello as `agent`: the first
/// message of the server, or why the connection failed.
async fn agent_hello(url: &str, pem: &ClientPem, agent: &str) -> Result<FromServer, String> {
    let endpoint = ank_proto::dial::endpoint(url, Some(pem), WAIT, None).unwrap();
    let channel = endpoint.connect().await.map_err(|e| format!("connect: {e:?}"))?;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(to_server_to_proto(&hello(agent))).await.unwrap();
    let mut client = AgentConnectionClient::new(channel);
    let response = client.connect_agent(ReceiverStream::new(rx)).await;
    let mut inbound = response.map_err(|status| format!("{:?}: {}", status.code(), status.message()))?.into_inner();
    let first = tokio::time::timeout(WAIT, inbound.message()).await.unwrap().unwrap().expect("a message");
    Ok(from_server_from_proto(first).unwrap().expect("a known message"))
}

#[tokio::test(start_paused = true)]
async fn tls_clients_check_the_name_ank_server_and_any_agent_name_passes_a_star_san() {
    let pki = Pki::new();
    let (url, shutdown) = start_server(&pki).await;
    // Ankaios' agent certificate: CN agent_A, SAN DNS `*`.
    let agent = pki.issue("agent", Role::Client, "agent_A", &["*"]);
    let pem = agent.client_pem(false).unwrap();
    assert_eq!(pem.server_name.as_deref(), Some("ank-server"));
    for name in ["agent_A", "agent_B"] {
        let first = agent_hello(&url, &pem, name).await.unwrap();
        assert!(matches!(first, FromServer::ServerHello(_)), "{name}: {first:?}");
    }
    // Opt-in: the URL's host (127.0.0.1) must be in the server's certificate; it is not.
    let by_host = agent.client_pem(true).unwrap();
    let e = agent_hello(&url, &by_host, "agent_A").await.unwrap_err();
    assert!(e.starts_with("connect:"), "{e}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn tls_agent_names_must_match_a_san_dns_name() {
    let pki = Pki::new();
    let (url, shutdown) = start_server(&pki).await;
    let pem = pki.issue("agent_a", Role::Client, "agent_A", &["agent_A"]).client_pem(false).unwrap();
    assert!(matches!(agent_hello(&url, &pem, "agent_A").await, Ok(FromServer::ServerHello(_))));
    let e = agent_hello(&url, &pem, "agent_B").await.unwrap_err();
    assert_eq!(e, "Unauthenticated: Agent name 'agent_B' does not match SAN [\"agent_A\"] in agent certificates!");
    let no_san = pki.issue("no_san", Role::Client, "agent_A", &[]).client_pem(false).unwrap();
    let e = agent_hello(&url, &no_san, "agent_A").await.unwrap_err();
    assert_eq!(e, "Unauthenticated: No subject alt names found in agent certificates!", "the CN does not count");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn hello_with_another_major_version_is_refused_with_ankaios_text() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(initial, listener, shutdown.clone()));
    let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().connect().await.unwrap();
    for version in ["0.1.0", "2.0.0"] {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let hello = ToServer::CommanderHello { protocol_version: version.into() };
        tx.send(to_server_to_proto(&hello)).await.unwrap();
        let status = CommandConnectionClient::new(channel.clone())
            .connect_command(ReceiverStream::new(rx))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(status.message(), format!("Unsupported protocol version '{version}'. Currently supported '1'"));
    }
    // Ankaios' own version is welcome: the commander gets its answers.
    let mut commander = ank_tests::commander::Commander::connect(&url).await;
    let state = commander
        .request(ank_common::messages::RequestContent::CompleteState {
            field_mask: vec![],
            subscribe_for_events: false,
        })
        .await;
    assert!(matches!(state, ank_common::messages::ResponseContent::CompleteState(_)), "{state:?}");
    shutdown.cancel();
}

/// `--crl_pem` on the clients (`ank`, `ank-agent`): a server certificate
/// the revocation list names is refused in the handshake; one it does not
/// name is accepted, and a broken list is reported before connecting.
#[tokio::test(start_paused = true)]
async fn clients_with_a_revocation_list_refuse_a_revoked_server_certificate() {
    use ank_tests::adversary;
    let pki = adversary::Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state("apiVersion: v1\n"), |_| {}).await;
    let server_pem = std::fs::read_to_string(pki.dir.path().join("server.pem")).unwrap();
    let other = pki.ca.issue(Role::Server, "other", &["ank-server".into()], Validity::Days(1)).unwrap();
    let connect = async |revoked: &str| {
        let mut pem = pki.client("cli", &[]);
        pem.crl = Some(pki.ca.revocation_list(&[revoked], 1, 1).unwrap().into_bytes());
        let endpoint = ank_proto::dial::endpoint(&url, Some(&pem), WAIT, None).unwrap();
        let channel = ank_proto::dial::connect(&endpoint, Some(&pem)).await.map_err(|e| format!("{e:?}"))?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.into() };
        tx.send(to_server_to_proto(&hello)).await.unwrap();
        CommandConnectionClient::new(channel)
            .connect_command(ReceiverStream::new(rx))
            .await
            .map_err(|s| format!("{s:?}"))?;
        Ok::<(), String>(())
    };
    let e = connect(&server_pem).await.unwrap_err();
    assert!(e.contains("Revoked") || e.contains("revoked"), "{e}");
    connect(&other.cert_pem).await.expect("a list that does not name the server's certificate");
    let mut broken = pki.client("cli", &[]);
    broken.crl = Some(b"not a list".to_vec());
    let e = ank_proto::dial::endpoint(&url, Some(&broken), WAIT, None).unwrap_err().to_string();
    assert!(e.contains("crl_pem"), "{e}");
    shutdown.cancel();
}

/// Key and certificate files with modes Ankaios refuses are refused where
/// each program reads them: the server's `ServerTls::load` (ank-server) and
/// `client_pem` (ank-agent at every connect, ank for each command).
#[test]
fn pem_files_with_loose_modes_are_refused_by_server_agent_and_ank() {
    use std::os::unix::fs::PermissionsExt;
    let pki = Pki::new();
    let set =
        |p: &std::path::Path, mode: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    let server = pki.issue("server", Role::Server, "ank-server", &["ank-server"]);
    let agent = pki.issue("agent", Role::Client, "agent_A", &["*"]);
    let PemSource::File(server_key) = &server.key else { unreachable!() };
    let PemSource::File(agent_key) = &agent.key else { unreachable!() };
    let PemSource::File(ca) = &agent.ca else { unreachable!() };
    assert!(ank_server::grpc::tls::ServerTls::load(server.clone()).is_ok(), "0600 keys load");
    assert!(agent.client_pem(false).is_ok());

    set(server_key, 0o640);
    let e = ank_server::grpc::tls::ServerTls::load(server.clone()).err().expect("refused").to_string();
    assert!(e.contains("has insecure permissions 640") && e.contains("0600 or 0400"), "{e}");
    set(server_key, 0o400);
    assert!(ank_server::grpc::tls::ServerTls::load(server).is_ok(), "0400 is fine too");

    set(agent_key, 0o644);
    let e = agent.client_pem(false).unwrap_err().to_string();
    assert!(e.contains(&format!("key_pem file '{}' has insecure permissions 644", agent_key.display())), "{e}");
    set(agent_key, 0o600);
    set(ca, 0o664);
    let e = agent.client_pem(false).unwrap_err().to_string();
    assert!(e.contains("ca_pem file") && e.contains("insecure permissions 664"), "{e}");
}
