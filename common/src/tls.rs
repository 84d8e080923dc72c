//! TLS material of the three binaries: where each PEM item comes from (a
//! file given by flag, env or config file, or inline content from a config
//! file), the choice between mTLS and `--insecure`, loading with errors that
//! name the item and the file, and the identity (CN and SAN DNS names) a
//! certificate carries. The only I/O here is reading the PEM files.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// PEM text given inline (a config file's `*_pem_content`). Its `Debug`
/// shows only its length, so a key never reaches a log line.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct PemText(String);

impl std::fmt::Debug for PemText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PemText(<{} bytes>)", self.0.len())
    }
}

impl std::ops::Deref for PemText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for PemText {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for PemText {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

/// Where one PEM item comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    File(PathBuf),
    Content(PemText),
}

impl PemSource {
    /// From a path (flag, env, config file) or inline content (config file).
    pub fn from_parts(path: Option<PathBuf>, content: Option<PemText>) -> Option<Self> {
        path.map(PemSource::File).or(content.map(PemSource::Content))
    }

    fn describe(&self, item: &str) -> String {
        match self {
            PemSource::File(p) => format!("{item} '{}'", p.display()),
            PemSource::Content(_) => format!("{item}_content"),
        }
    }

    fn read(&self, item: &str) -> Result<Vec<u8>, String> {
        match self {
            PemSource::File(p) => std::fs::read(p)
                .map_err(|e| format!("cannot read {}: {e}", self.describe(item).replacen(' ', " file ", 1))),
            PemSource::Content(c) => Ok(c.as_bytes().to_vec()),
        }
    }
}

/// The three PEM items of an mTLS set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSources {
    pub ca: PemSource,
    pub crt: PemSource,
    pub key: PemSource,
}

/// Decides between mTLS and plain connections: `--insecure` wins (PEM
/// items are then ignored, as Ankaios does); otherwise all three items are
/// needed, and an error says what is missing. `env` is the prefix of the
/// binary's variables (`ANKAGENT`, ...).
pub fn choose(
    insecure: bool,
    ca: Option<PemSource>,
    crt: Option<PemSource>,
    key: Option<PemSource>,
    env: &str,
) -> Result<Option<TlsSources>, String> {
    if insecure {
        return Ok(None);
    }
    match (ca, crt, key) {
        (None, None, None) => Err(format!(
            "neither certificates nor --insecure given: pass --ca_pem, --crt_pem and --key_pem \
             (or {env}_CA_PEM, {env}_CRT_PEM, {env}_KEY_PEM, or the config file's *_pem keys) for mTLS, \
             or --insecure (-k, {env}_INSECURE=true) for unencrypted connections"
        )),
        (Some(ca), Some(crt), Some(key)) => Ok(Some(TlsSources { ca, crt, key })),
        (ca, crt, key) => {
            let missing: Vec<&str> =
                [("--ca_pem", ca.is_none()), ("--crt_pem", crt.is_none()), ("--key_pem", key.is_none())]
                    .into_iter()
                    .filter_map(|(flag, absent)| absent.then_some(flag))
                    .collect();
            Err(format!("incomplete mTLS set-up: {} missing (all three are needed)", missing.join(", ")))
        }
    }
}

/// Loaded and checked TLS material.
#[derive(Debug)]
pub struct TlsMaterial {
    /// The trusted CA certificates.
    pub ca: Vec<CertificateDer<'static>>,
    /// Our certificate chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// The PEM texts as read, for APIs that take PEM.
    pub ca_pem: Vec<u8>,
    pub crt_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl TlsSources {
    /// Reads and parses the three items; our own certificate must be
    /// within its validity period.
    pub fn load(&self) -> Result<TlsMaterial, String> {
        let ca_pem = self.ca.read("ca_pem")?;
        let crt_pem = self.crt.read("crt_pem")?;
        let key_pem = self.key.read("key_pem")?;
        let ca = certificates(&ca_pem, &self.ca.describe("ca_pem"))?;
        let chain = certificates(&crt_pem, &self.crt.describe("crt_pem"))?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| format!("{}: no usable private key: {e}", self.key.describe("key_pem")))?;
        check_validity(&chain[0], &self.crt.describe("crt_pem"))?;
        Ok(TlsMaterial { ca, chain, key, ca_pem, crt_pem, key_pem })
    }

    /// Loads the items for a client's connection (checked as by [`load`](Self::load)).
    pub fn client_pem(&self) -> Result<ank_proto::dial::ClientPem, String> {
        let m = self.load()?;
        Ok(ank_proto::dial::ClientPem { ca: m.ca_pem, crt: m.crt_pem, key: m.key_pem })
    }
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{what}: not a valid PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what}: no certificate found (expected '-----BEGIN CERTIFICATE-----')"));
    }
    Ok(certs)
}

fn check_validity(cert: &CertificateDer<'_>, what: &str) -> Result<(), String> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert).map_err(|e| format!("{what}: cannot parse the certificate: {e}"))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default();
    let validity = parsed.validity();
    if now > validity.not_after.timestamp() {
        return Err(format!("{what}: the certificate expired on {}", validity.not_after));
    }
    if now < validity.not_before.timestamp() {
        return Err(format!("{what}: the certificate is not valid before {}", validity.not_before));
    }
    Ok(())
}

/// The names a certificate is issued to: its subject CNs, then its SAN DNS
/// names, without duplicates.
pub fn identity_names(cert: &[u8]) -> Result<Vec<String>, String> {
    let (_, parsed) =
        x509_parser::parse_x509_certificate(cert).map_err(|e| format!("cannot parse certificate: {e}"))?;
    let mut names: Vec<String> =
        parsed.subject().iter_common_name().filter_map(|cn| cn.as_str().ok().map(str::to_owned)).collect();
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push((*dns).to_owned());
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_pem_text_never_shows_in_debug_output() {
        let key = PemSource::Content("-----BEGIN PRIVATE KEY-----\nSECRETBODY\n-----END PRIVATE KEY-----\n".into());
        let sources = TlsSources { ca: key.clone(), crt: key.clone(), key };
        let shown = format!("{sources:?}");
        assert!(!shown.contains("SECRETBODY"), "{shown}");
        assert!(shown.contains("PemText(<65 bytes>)"), "{shown}");
    }

    fn file(p: &str) -> Option<PemSource> {
        Some(PemSource::File(p.into()))
    }

    #[test]
    fn mtls_or_insecure_must_be_chosen_explicitly() {
        assert_eq!(choose(true, None, None, None, "ANKAGENT"), Ok(None));
        let e = choose(false, None, None, None, "ANKAGENT").unwrap_err();
        assert!(e.starts_with("neither certificates nor --insecure given") && e.contains("ANKAGENT_CA_PEM"), "{e}");
        let all = choose(false, file("ca"), file("crt"), Some(PemSource::Content("KEY".into())), "ANK").unwrap();
        assert_eq!(all.unwrap().key, PemSource::Content("KEY".into()));
        assert_eq!(
            choose(false, file("ca"), None, None, "ANK"),
            Err("incomplete mTLS set-up: --crt_pem, --key_pem missing (all three are needed)".into())
        );
        assert_eq!(choose(true, file("ca"), None, None, "ANK"), Ok(None), "--insecure wins");
    }
}
