//! A client's own mTLS connector, used when it has certificate revocation
//! lists (tonic's TLS set-up takes none): TCP, then a rustls handshake
//! that trusts the CA, presents the client certificate, checks the server
//! certificate's name and refuses a server certificate the lists revoke.
//! tonic then speaks plain HTTP/2 over the TLS stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tonic::transport::Uri;

use super::dial::ClientPem;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why the PEM items of a client with revocation lists make no TLS
/// configuration; each names the item.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    #[error("ca_pem: {0}")]
    CaPem(rustls::pki_types::pem::Error),
    #[error("ca_pem: unusable CA certificate: {0}")]
    CaCertificate(rustls::Error),
    #[error("crl_pem: unreadable revocation list: {0}")]
    UnreadableCrl(rustls::pki_types::pem::Error),
    #[error("crl_pem: no revocation list (X509 CRL) found")]
    NoCrl,
    #[error("ca_pem/crl_pem: {0}")]
    Verifier(rustls::server::VerifierBuilderError),
    #[error("crt_pem: {0}")]
    CrtPem(rustls::pki_types::pem::Error),
    #[error("key_pem: {0}")]
    KeyPem(rustls::pki_types::pem::Error),
    /// The provider offers no safe protocol version.
    #[error("{0}")]
    Protocols(rustls::Error),
    #[error("crt_pem/key_pem: {0}")]
    ClientAuth(rustls::Error),
}

/// Builds the rustls configuration of `pem`; an error names the item.
fn config(pem: &ClientPem) -> Result<Arc<ClientConfig>, ClientTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&pem.ca) {
        let ca = ca.map_err(ClientTlsError::CaPem)?;
        roots.add(ca).map_err(ClientTlsError::CaCertificate)?;
    }
    let crls = CertificateRevocationListDer::pem_slice_iter(pem.crl.as_deref().unwrap_or_default())
        .collect::<Result<Vec<_>, _>>()
        .map_err(ClientTlsError::UnreadableCrl)?;
    if crls.is_empty() {
        return Err(ClientTlsError::NoCrl);
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .with_crls(crls)
        .only_check_end_entity_revocation()
        .build()
        .map_err(ClientTlsError::Verifier)?;
    let chain =
        CertificateDer::pem_slice_iter(&pem.crt).collect::<Result<Vec<_>, _>>().map_err(ClientTlsError::CrtPem)?;
    let key = PrivateKeyDer::from_pem_slice(&pem.key).map_err(ClientTlsError::KeyPem)?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientTlsError::Protocols)?
        .with_webpki_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(ClientTlsError::ClientAuth)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// Checks that `pem` makes a usable configuration (at set-up, so that a
/// broken revocation list is reported before any connection attempt).
pub(crate) fn check(pem: &ClientPem) -> Result<(), ClientTlsError> {
    config(pem).map(|_| ())
}

/// The connector tonic calls for each connection.
#[derive(Clone)]
pub(crate) struct Connector {
    pem: Arc<ClientPem>,
}

impl Connector {
    pub(crate) fn new(pem: ClientPem) -> Self {
        Self { pem: Arc::new(pem) }
    }
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<TlsStream<TcpStream>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let pem = self.pem.clone();
        Box::pin(async move {
            let host = uri.host().ok_or("server url without host")?.trim_matches(['[', ']']).to_owned();
            let port = uri.port_u16().unwrap_or(443);
            let name = pem.server_name.clone().unwrap_or_else(|| host.clone());
            let name = ServerName::try_from(name).map_err(|e| format!("server name: {e}"))?;
            let connector = TlsConnector::from(config(&pem)?);
            let tcp = TcpStream::connect((host.as_str(), port)).await?;
            tcp.set_nodelay(true)?;
            let tls = connector.connect(name, tcp).await?;
            Ok(TokioIo::new(tls))
        })
    }
}
