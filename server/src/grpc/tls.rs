//! mTLS on the server's listener: the rustls configuration (client
//! certificates required, signed by the configured CA, not revoked by the
//! optional revocation list `--crl_pem`), reloadable on
//! SIGHUP without touching open connections, the accept loop that runs
//! each handshake in its own task with a time limit, and the connection
//! type that hands tonic the peer's certificate names as [`PeerIdentity`].

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use ank_common::tls::{CertNames, TlsMaterial, TlsSources};
use rustls::RootCertStore;
use rustls::pki_types::CertificateRevocationListDer;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::Connected;

/// How long a client gets to complete the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is on the other end of a TLS connection.
#[derive(Debug, Clone)]
pub struct PeerIdentity {
    pub addr: SocketAddr,
    /// The CN and SAN DNS names of the client certificate.
    pub names: Arc<[String]>,
    /// Its SAN DNS names alone; `None` without a SAN extension.
    pub san_dns: Option<Arc<[String]>>,
    /// How many certificates the client presented.
    pub chain_len: usize,
}

impl PeerIdentity {
    /// The identity of the client that presented `certs`, leaf first.
    pub fn of(addr: SocketAddr, certs: &[rustls::pki_types::CertificateDer<'_>]) -> Self {
        let names = certs.first().and_then(|leaf| CertNames::of(leaf).ok()).unwrap_or_default();
        Self { addr, names: names.all().into(), san_dns: names.san_dns.map(Into::into), chain_len: certs.len() }
    }
}

/// Why the server's TLS configuration cannot be built (each text names
/// the flag whose file is at fault).
#[derive(Debug, thiserror::Error)]
pub enum ServerTlsError {
    /// A PEM item cannot be read or is unusable.
    #[error(transparent)]
    Material(#[from] ank_common::tls::TlsError),
    /// The revocation list file cannot be read.
    #[error("crl_pem '{path}': {source}")]
    CrlFile { path: String, source: io::Error },
    /// The revocation list file holds no usable list.
    #[error("crl_pem '{path}': {source}")]
    CrlContent { path: String, source: ank_common::tls::TlsError },
    /// A CA certificate is unusable.
    #[error("ca_pem: unusable CA certificate: {0}")]
    Ca(rustls::Error),
    /// The client-certificate verifier cannot be built from the CA.
    #[error("ca_pem: {0}")]
    Verifier(rustls::server::VerifierBuilderError),
    /// The protocol versions are refused by the crypto provider.
    #[error("{0}")]
    Protocols(rustls::Error),
    /// The server's certificate chain and key do not go together.
    #[error("crt_pem/key_pem: {0}")]
    Certificate(rustls::Error),
}

/// The server's TLS configuration, replaced as a whole on reload.
pub struct ServerTls {
    sources: TlsSources,
    /// The certificate revocation list(s) (`--crl_pem`), if any.
    crl: Option<PathBuf>,
    config: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Loads the PEM items and builds the configuration.
    pub fn load(sources: TlsSources) -> Result<Self, ServerTlsError> {
        Self::load_with_crl(sources, None)
    }

    /// Loads the PEM items and, with `crl`, the revocation lists of the
    /// CA: a client certificate they revoke is refused in the handshake.
    pub fn load_with_crl(sources: TlsSources, crl: Option<PathBuf>) -> Result<Self, ServerTlsError> {
        let config = build(&sources.load()?, &load_crls(crl.as_deref())?)?;
        Ok(Self { sources, crl, config: RwLock::new(Arc::new(config)) })
    }

    /// Reads the PEM items (and the revocation list) again; new
    /// connections use them, open ones are kept. On error the old
    /// configuration stays.
    pub fn reload(&self) -> Result<(), ServerTlsError> {
        let config = build(&self.sources.load()?, &load_crls(self.crl.as_deref())?)?;
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config);
        Ok(())
    }

    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

/// The revocation lists in the PEM file `path` (none without a path).
fn load_crls(path: Option<&Path>) -> Result<Vec<CertificateRevocationListDer<'static>>, ServerTlsError> {
    let Some(path) = path else { return Ok(Vec::new()) };
    let pem =
        std::fs::read(path).map_err(|source| ServerTlsError::CrlFile { path: path.display().to_string(), source })?;
    ank_common::tls::revocation_lists(&pem)
        .map_err(|source| ServerTlsError::CrlContent { path: path.display().to_string(), source })
}

fn build(
    material: &TlsMaterial,
    crls: &[CertificateRevocationListDer<'static>],
) -> Result<ServerConfig, ServerTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for ca in &material.ca {
        roots.add(ca.clone()).map_err(ServerTlsError::Ca)?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .with_crls(crls.iter().cloned())
        .only_check_end_entity_revocation()
        .build()
        .map_err(ServerTlsError::Verifier)?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ServerTlsError::Protocols)?
        .with_client_cert_verifier(verifier)
        .with_single_cert(material.chain.clone(), material.key.clone_key())
        .map_err(ServerTlsError::Certificate)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Accepts TCP connections on `listener` and yields those whose TLS
/// handshake succeeds; failed handshakes are logged with their reason.
pub fn incoming(
    listener: TcpListener,
    tls: Arc<ServerTls>,
    shutdown: CancellationToken,
) -> ReceiverStream<Result<TlsConn, io::Error>> {
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let (stream, addr) = tokio::select! {
                () = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!("cannot accept a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let (acceptor, tx) = (tls.acceptor(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        let peer = PeerIdentity::of(addr, stream.get_ref().1.peer_certificates().unwrap_or_default());
                        let _ = tx.send(Ok(TlsConn { inner: stream, peer })).await;
                    }
                    Ok(Err(e)) => tracing::warn!("TLS handshake with {addr} failed: {e}"),
                    Err(_) => tracing::warn!("TLS handshake with {addr} did not finish within {HANDSHAKE_TIMEOUT:?}"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}

/// A server-side TLS connection with its peer's identity.
pub struct TlsConn {
    inner: tokio_rustls::server::TlsStream<TcpStream>,
    peer: PeerIdentity,
}

impl Connected for TlsConn {
    type ConnectInfo = PeerIdentity;

    fn connect_info(&self) -> PeerIdentity {
        self.peer.clone()
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use ank_certs::{Ca, Role, Validity};
    use ank_common::tls::PemSource;

    use super::*;

    #[test]
    fn reload_takes_new_certificates_and_keeps_the_old_ones_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("test CA").unwrap();
        let write = |name: &str| {
            let issued = ca.issue(Role::Server, name, &["localhost".into()], Validity::Days(1)).unwrap();
            std::fs::write(dir.path().join("crt.pem"), issued.cert_pem).unwrap();
            std::fs::write(dir.path().join("key.pem"), issued.key_pem).unwrap();
            // A private key must be 0600 or 0400, as Ankaios requires.
            let key_mode = std::os::unix::fs::PermissionsExt::from_mode(0o600);
            std::fs::set_permissions(dir.path().join("key.pem"), key_mode).unwrap();
        };
        std::fs::write(dir.path().join("ca.pem"), ca.cert_pem()).unwrap();
        write("first");
        let sources = TlsSources {
            ca: PemSource::File(dir.path().join("ca.pem")),
            crt: PemSource::File(dir.path().join("crt.pem")),
            key: PemSource::File(dir.path().join("key.pem")),
        };
        let tls = ServerTls::load(sources).unwrap();
        let before = tls.config.read().unwrap().clone();
        write("second");
        tls.reload().unwrap();
        let after = tls.config.read().unwrap().clone();
        assert!(!Arc::ptr_eq(&before, &after), "new connections get the new configuration");
        std::fs::write(dir.path().join("crt.pem"), "garbage").unwrap();
        let e = tls.reload().unwrap_err().to_string();
        assert!(e.contains("crt_pem") && e.contains("no certificate found"), "{e}");
        assert!(Arc::ptr_eq(&after, &tls.config.read().unwrap().clone()), "a failed reload keeps the old one");
    }
}
