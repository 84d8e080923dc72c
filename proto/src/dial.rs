//! How a client (agent or `ank`) dials the server: an `http://` URL
//! without TLS, or an `https://` URL with mTLS (the CA to trust the server
//! by, our certificate and key, all PEM, and the name the server's
//! certificate must carry: `ank-server` as in Ankaios, or the URL's host),
//! and the [`Heartbeat`] that finds
//! a silently dead link (HTTP/2 PINGs, answered by any gRPC peer). With
//! revocation lists ([`ClientPem::crl`]) the TLS handshake is ours
//! (rustls with the lists), as tonic's TLS set-up takes none: [`connect`].

use std::time::Duration;

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::tls_connector as crl;
pub use crate::tls_connector::ClientTlsError;

/// Why no endpoint can be made for a server URL.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("invalid server url '{url}': {cause}")]
    InvalidUrl { url: String, cause: tonic::transport::Error },
    /// The PEM items (with revocation lists) make no TLS configuration.
    #[error(transparent)]
    ClientTls(#[from] ClientTlsError),
    #[error("TLS set-up for '{url}': {cause}")]
    TlsSetup { url: String, cause: tonic::transport::Error },
    #[error("server url '{url}' must start with https:// when certificates are given")]
    NeedsHttps { url: String },
    #[error("server url '{url}' must start with http:// with --insecure (https:// needs certificates)")]
    NeedsHttp { url: String },
}

/// For callers that still report errors as text.
impl From<DialError> for String {
    fn from(e: DialError) -> Self {
        e.to_string()
    }
}

/// The name Ankaios' clients expect in the server's certificate, whatever
/// address they dial.
pub const ANKAIOS_SERVER_NAME: &str = "ank-server";

/// The PEM texts of a client's mTLS set-up, and the name the server's
/// certificate must carry.
#[derive(Debug, Clone)]
pub struct ClientPem {
    pub ca: Vec<u8>,
    pub crt: Vec<u8>,
    pub key: Vec<u8>,
    /// `Some(name)`: the server's certificate must be issued to `name`
    /// ([`ANKAIOS_SERVER_NAME`], as Ankaios); `None`: to the host of the URL.
    pub server_name: Option<String>,
    /// Certificate revocation lists (PEM, `--crl_pem`): a server
    /// certificate they list is refused. `None`: no revocation check.
    pub crl: Option<Vec<u8>>,
}

/// Heartbeats on a connection: a PING every `interval`; a peer that does
/// not answer one within `timeout` is taken as gone and the connection
/// closed, so a link cut without FIN or RST is noticed within
/// `interval + timeout` instead of TCP's minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub interval: Duration,
    pub timeout: Duration,
}

impl Heartbeat {
    /// From the millisecond settings of the binaries; an interval of 0
    /// switches heartbeats off.
    pub fn from_millis(interval_ms: u64, timeout_ms: u64) -> Option<Self> {
        (interval_ms > 0).then(|| Self {
            interval: Duration::from_millis(interval_ms),
            timeout: Duration::from_millis(timeout_ms.max(1)),
        })
    }
}

impl Default for Heartbeat {
    fn default() -> Self {
        Self { interval: Duration::from_secs(1), timeout: Duration::from_secs(2) }
    }
}

/// An endpoint for `url`; `tls` decides the scheme it must have.
pub fn endpoint(
    url: &str,
    tls: Option<&ClientPem>,
    connect_timeout: Duration,
    heartbeat: Option<Heartbeat>,
) -> Result<Endpoint, DialError> {
    let invalid = |cause| DialError::InvalidUrl { url: url.to_owned(), cause };
    let mut endpoint =
        Endpoint::from_shared(url.to_owned()).map_err(invalid)?.connect_timeout(connect_timeout).tcp_nodelay(true);
    if let Some(h) = heartbeat {
        endpoint =
            endpoint.http2_keep_alive_interval(h.interval).keep_alive_timeout(h.timeout).keep_alive_while_idle(true);
    }
    match (tls, url.split_once("://").map(|(scheme, _)| scheme)) {
        (Some(pem), Some("https")) if pem.crl.is_some() => {
            // The TLS is the connector's ([`connect`]): tonic sees plain HTTP/2.
            crl::check(pem)?;
            let plain = url.replacen("https://", "http://", 1);
            let mut plain = Endpoint::from_shared(plain).map_err(invalid)?;
            plain = plain.connect_timeout(connect_timeout).tcp_nodelay(true);
            if let Some(h) = heartbeat {
                plain = plain
                    .http2_keep_alive_interval(h.interval)
                    .keep_alive_timeout(h.timeout)
                    .keep_alive_while_idle(true);
            }
            Ok(plain)
        }
        (Some(pem), Some("https")) => {
            let mut config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&pem.ca))
                .identity(Identity::from_pem(&pem.crt, &pem.key));
            if let Some(name) = &pem.server_name {
                config = config.domain_name(name);
            }
            endpoint.tls_config(config).map_err(|cause| DialError::TlsSetup { url: url.to_owned(), cause })
        }
        (Some(_), _) => Err(DialError::NeedsHttps { url: url.to_owned() }),
        (None, Some("http")) => Ok(endpoint),
        (None, _) => Err(DialError::NeedsHttp { url: url.to_owned() }),
    }
}

/// Connects `endpoint` (made by [`endpoint`] with `tls`): with revocation
/// lists through our own TLS connector, else as tonic connects.
pub async fn connect(endpoint: &Endpoint, tls: Option<&ClientPem>) -> Result<Channel, tonic::transport::Error> {
    match tls.filter(|pem| pem.crl.is_some()) {
        Some(pem) => endpoint.connect_with_connector(crl::Connector::new(pem.clone())).await,
        None => endpoint.connect().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheme_must_match_the_tls_choice() {
        let pem = ClientPem { ca: vec![], crt: vec![], key: vec![], server_name: None, crl: None };
        let t = Duration::from_secs(1);
        assert!(endpoint("http://127.0.0.1:1", None, t, Some(Heartbeat::default())).is_ok());
        assert!(endpoint("https://127.0.0.1:1", None, t, None).unwrap_err().to_string().contains("needs certificates"));
        assert!(
            endpoint("http://127.0.0.1:1", Some(&pem), t, None)
                .unwrap_err()
                .to_string()
                .contains("must start with https://")
        );
        assert!(endpoint("not a url", None, t, None).is_err());
    }
}
