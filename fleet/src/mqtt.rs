//! The broker connection both sides use: the broker URL (`mqtts://` with
//! TLS, `mqtt://` without), the TLS client configuration from PEM files
//! (the broker's CA, this client's certificate and key: the broker takes
//! the certificate's CN as the user name its ACL checks) and MQTT 5 options.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rumqttc::v5::MqttOptions;
use rumqttc::{TlsConfiguration, Transport};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why the broker connection cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("invalid broker URL '{0}': expected mqtts://HOST[:PORT] or mqtt://HOST[:PORT]")]
    Url(String),
    #[error("cannot read {what} '{path}': {source}")]
    Pem { what: &'static str, path: PathBuf, source: rustls_pki_types::pem::Error },
    #[error("'{0}' holds no certificate")]
    NoCertificate(PathBuf),
    #[error("the TLS configuration is refused: {0}")]
    Tls(#[from] rustls::Error),
    #[error("mqtts:// needs --ca, --cert and --key (the broker checks the client's certificate)")]
    MissingTls,
    #[error(
        "refusing plain '{0}': without TLS the broker link is neither encrypted nor authenticated; use mqtts:// or pass --allow-plaintext \
         (tests only)"
    )]
    Plaintext(String),
}

/// Where the broker is and whether to use TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUrl {
    pub host: String,
    pub port: u16,
    pub tls: bool,
}

impl BrokerUrl {
    /// Reads `mqtts://host:port` or `mqtt://host:port` (ports 8883 and 1883 by default).
    pub fn parse(url: &str) -> Result<Self, SetupError> {
        let bad = || SetupError::Url(url.to_owned());
        let (tls, rest) = if let Some(rest) = url.strip_prefix("mqtts://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("mqtt://") {
            (false, rest)
        } else {
            return Err(bad());
        };
        let rest = rest.trim_end_matches('/');
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.starts_with('[') => (h, p.parse().map_err(|_| bad())?),
            _ => (rest, if tls { 8883 } else { 1883 }),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains('/') {
            return Err(bad());
        }
        Ok(Self { host: host.to_owned(), port, tls })
    }
}

/// The PEM files of a TLS client.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

fn certs(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, SetupError> {
    let pem = |source| SetupError::Pem { what, path: path.to_owned(), source };
    let certs = CertificateDer::pem_file_iter(path).map_err(pem)?.collect::<Result<Vec<_>, _>>().map_err(pem)?;
    if certs.is_empty() {
        return Err(SetupError::NoCertificate(path.to_owned()));
    }
    Ok(certs)
}

/// A rustls client configuration (ring provider) that trusts `ca` and
/// presents `cert` with `key`.
pub fn tls_config(files: &TlsFiles) -> Result<rustls::ClientConfig, SetupError> {
    let (Some(ca), Some(cert), Some(key)) = (&files.ca, &files.cert, &files.key) else {
        return Err(SetupError::MissingTls);
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca, "the CA certificate")? {
        roots.add(c)?;
    }
    let chain = certs(cert, "the client certificate")?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| SetupError::Pem {
        what: "the client key",
        path: key.clone(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)?)
}

/// MQTT 5 options for `client_id` at `url`, TLS from `files` for mqtts://.
/// A plain `mqtt://` URL is refused unless `allow_plaintext`.
pub fn options(
    client_id: &str,
    url: &BrokerUrl,
    files: &TlsFiles,
    allow_plaintext: bool,
) -> Result<MqttOptions, SetupError> {
    if !url.tls && !allow_plaintext {
        return Err(SetupError::Plaintext(format!("mqtt://{}:{}", url.host, url.port)));
    }
    let mut options = MqttOptions::new(client_id, url.host.clone(), url.port);
    options.set_keep_alive(Duration::from_secs(30));
    options.set_max_packet_size(Some(4 * 1024 * 1024));
    // rumqttc sizes its in-flight table by this limit up front (u16::MAX
    // by default: about 10 MiB); a connector has a few messages in flight.
    options.set_outgoing_inflight_upper_limit(32);
    if url.tls {
        options.set_transport(Transport::Tls(TlsConfiguration::Rustls(Arc::new(tls_config(files)?))));
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_urls_with_and_without_tls_and_port() {
        let u = BrokerUrl::parse("mqtts://10.0.0.1:8884").unwrap();
        assert_eq!(u, BrokerUrl { host: "10.0.0.1".into(), port: 8884, tls: true });
        assert_eq!(BrokerUrl::parse("mqtts://broker").unwrap().port, 8883);
        assert_eq!(
            BrokerUrl::parse("mqtt://broker/").unwrap(),
            BrokerUrl { host: "broker".into(), port: 1883, tls: false }
        );
        assert_eq!(BrokerUrl::parse("mqtt://[::1]:1884").unwrap().host, "::1");
        for bad in ["broker:1883", "http://b", "mqtt://", "mqtt://b:x"] {
            assert!(BrokerUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_mqtt_is_refused_unless_asked_for_by_name() {
        let url = BrokerUrl::parse("mqtt://broker").unwrap();
        let text = options("v01", &url, &TlsFiles::default(), false).unwrap_err().to_string();
        assert!(
            text.starts_with("refusing plain 'mqtt://broker:1883'") && text.contains("--allow-plaintext"),
            "{text}"
        );
        assert!(options("v01", &url, &TlsFiles::default(), true).is_ok());
    }

    #[test]
    fn tls_needs_all_three_files_and_names_a_missing_one() {
        assert!(matches!(tls_config(&TlsFiles::default()), Err(SetupError::MissingTls)));
        let files = TlsFiles {
            ca: Some("/nonexistent/ca.pem".into()),
            cert: Some("/nonexistent/c.pem".into()),
            key: Some("/nonexistent/k.pem".into()),
        };
        let text = tls_config(&files).unwrap_err().to_string();
        assert!(text.starts_with("cannot read the CA certificate '/nonexistent/ca.pem'"), "{text}");
    }
}
