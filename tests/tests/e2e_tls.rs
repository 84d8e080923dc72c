//! mTLS end to end with the built binaries and certificates made by
//! `ank-certs` (rcgen): an agent and `ank` with valid certificates work; a
//! certificate from another CA, an expired one, an agent name that is not
//! in the certificate, a client without a certificate and a read-only
//! client's write are each refused with a clear error on both sides.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ank_certs::{Ca, Role, Validity};
use ank_tests::binaries::bin;

struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("test CA").unwrap();
        let other = Ca::new("someone else's CA").unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.cert_pem()).unwrap();
        let write = |file: &str, ca: &Ca, role, name: &str, sans: &[String], validity| {
            let issued = ca.issue(role, name, sans, validity).unwrap();
            std::fs::write(dir.path().join(format!("{file}.pem")), issued.cert_pem).unwrap();
            std::fs::write(dir.path().join(format!("{file}-key.pem")), issued.key_pem).unwrap();
            // A private key must be 0600 or 0400, as Ankaios requires.
            let key_mode = std::os::unix::fs::PermissionsExt::from_mode(0o600);
            std::fs::set_permissions(dir.path().join(format!("{file}-key.pem")), key_mode).unwrap();
        };
        // Clients check the name `ank-server`, as Ankaios' do.
        let local = ["ank-server".to_owned(), "localhost".to_owned(), "127.0.0.1".to_owned()];
        let agent_a = ["agent_A".to_owned()];
        write("server", &ca, Role::Server, "ank-server", &local, Validity::Days(1));
        write("agent_A", &ca, Role::Client, "agent_A", &agent_a, Validity::Days(1));
        write("admin", &ca, Role::Client, "admin", &[], Validity::Days(1));
        write("viewer", &ca, Role::Client, "viewer", &[], Validity::Days(1));
        write("foreign", &other, Role::Client, "agent_A", &agent_a, Validity::Days(1));
        write("expired", &ca, Role::Client, "agent_A", &agent_a, Validity::Expired);
        Self { dir }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// `--ca_pem ... --crt_pem <who>.pem --key_pem <who>-key.pem`.
    fn flags(&self, who: &str) -> Vec<String> {
        let p = |f: String| self.path(&f).display().to_string();
        vec![
            "--ca_pem".into(),
            p("ca.pem".into()),
            "--crt_pem".into(),
            p(format!("{who}.pem")),
            "--key_pem".into(),
            p(format!("{who}-key.pem")),
        ]
    }
}

struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(cmd: &mut Command, log: PathBuf) -> Self {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd.stdout(Stdio::null()).stderr(file).spawn().unwrap();
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for_log(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "'{text}' not logged; log:\n{log}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ank(url: &str, flags: &[String], args: &[&str]) -> Output {
    Command::new(bin("ank")).args(["--server-url", url]).args(flags).args(args).stdin(Stdio::null()).output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn agent(certs: &Certs, name: &str, who: &str, url: &str, log: &Path) -> Proc {
    let run = log.with_extension("run");
    Proc::spawn(
        Command::new(bin("ank-agent"))
            .args(["--name", name, "--server-url", url, "--run-folder"])
            .arg(&run)
            .args(certs.flags(who)),
        log.to_path_buf(),
    )
}

#[test]
// [stest->swdd~agent-supports-pem-file-paths-as-cli-arguments~1]
// [stest->swdd~agent-provides-file-paths-to-communication-middleware~1]
fn e2e_mtls_admits_valid_identities_and_refuses_the_others_with_clear_errors() {
    ank_tests::require_podman();
    let certs = Certs::new();
    let logs = tempfile::tempdir().unwrap();
    let port = ank_tests::free_port();
    let url = format!("https://127.0.0.1:{port}");
    let server = Proc::spawn(
        Command::new(bin("ank-server"))
            .args(["--address", &format!("127.0.0.1:{port}"), "--read-only-client", "viewer"])
            .args(certs.flags("server")),
        logs.path().join("server.log"),
    );
    server.wait_for_log("listening on");

    // Valid: the agent connects, the admin CLI sees it and may write.
    let _a = agent(&certs, "agent_A", "agent_A", &url, &logs.path().join("a.log"));
    let admin = certs.flags("admin");
    let start = Instant::now();
    loop {
        let o = ank(&url, &admin, &["get", "agents"]);
        if o.status.success() && text(&o).contains("agent_A") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "agent not listed: {}\n{}", text(&o), server.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let manifest = logs.path().join("configs.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nconfigs:\n  greeting: hi\n").unwrap();
    let manifest = manifest.display().to_string();
    let o = ank(&url, &admin, &["apply", &manifest]);
    assert!(o.status.success(), "admin write: {}", text(&o));

    // Another CA: refused by the server's handshake.
    let foreign = agent(&certs, "agent_A", "foreign", &url, &logs.path().join("foreign.log"));
    let server_log = server.wait_for_log("UnknownIssuer");
    assert!(server_log.contains("TLS handshake with 127.0.0.1:"), "{server_log}");
    // The client usually gets the server's alert; under load the server may
    // have closed the connection before the alert is read.
    let agent_log = foreign.wait_for_log("no connection to server");
    assert!(
        ["UnknownCA", "reset", "broken pipe", "closed"].iter().any(|t| agent_log.contains(t)),
        "the agent's log does not say why: {agent_log}"
    );

    // Expired: the agent refuses to start and says why.
    let o = Command::new(bin("ank-agent"))
        .args(["--name", "agent_A", "--server-url", &url])
        .args(certs.flags("expired"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("the certificate expired on"), "{}", text(&o));
    // A client that presents it anyway (not one of ours, which refuse to):
    // the server's handshake refuses it.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let pem = ank_proto::dial::ClientPem {
        ca: std::fs::read(certs.path("ca.pem")).unwrap(),
        crt: std::fs::read(certs.path("expired.pem")).unwrap(),
        key: std::fs::read(certs.path("expired-key.pem")).unwrap(),
        server_name: Some(ank_proto::dial::ANKAIOS_SERVER_NAME.to_owned()),
        crl: None,
    };
    let refused = rt.block_on(async {
        let endpoint = ank_proto::dial::endpoint(&url, Some(&pem), Duration::from_secs(5), None).unwrap();
        match endpoint.connect().await {
            Err(e) => e.to_string(),
            Ok(channel) => {
                let mut client = ank_proto::grpc_api::command_connection_client::CommandConnectionClient::new(channel);
                client.connect_command(tokio_stream::iter(Vec::new())).await.unwrap_err().to_string()
            }
        }
    });
    assert!(!refused.is_empty());
    let server_log = server.wait_for_log("invalid peer certificate: certificate expired");
    assert!(server_log.contains("TLS handshake with 127.0.0.1:"), "{server_log}");

    // A name that is not in the certificate.
    let liar = agent(&certs, "agent_B", "agent_A", &url, &logs.path().join("liar.log"));
    let reason = "Agent name 'agent_B' does not match SAN [\"agent_A\"] in agent certificates!";
    server.wait_for_log(reason);
    // The agent logs the server's gRPC status, which quotes the message.
    liar.wait_for_log(&format!("{:?}", reason));

    // A client without a certificate: the server's handshake refuses it.
    let ca = std::fs::read(certs.path("ca.pem")).unwrap();
    let err = rt.block_on(async {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(ca))
            .domain_name("ank-server");
        let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().tls_config(tls).unwrap();
        let channel = channel.connect().await.unwrap();
        let mut client = ank_proto::grpc_api::command_connection_client::CommandConnectionClient::new(channel);
        client.connect_command(tokio_stream::iter(Vec::new())).await.unwrap_err()
    });
    assert!(!err.message().is_empty());
    server.wait_for_log("peer sent no certificates");
    let o = ank(&url, &[], &["get", "agents"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("Missing certificate files: Either provide mTLS config"), "{}", text(&o));

    // Read-only: the viewer reads, its write is refused.
    let viewer = certs.flags("viewer");
    let o = ank(&url, &viewer, &["get", "agents"]);
    assert!(o.status.success() && text(&o).contains("agent_A"), "{}", text(&o));
    let o = ank(&url, &viewer, &["get", "configs"]);
    assert!(o.status.success() && text(&o).contains("greeting"), "{}", text(&o));
    let o = ank(&url, &viewer, &["apply", "-d", &manifest]);
    assert!(!o.status.success() && text(&o).contains("'viewer' is read-only"), "{}", text(&o));
}
