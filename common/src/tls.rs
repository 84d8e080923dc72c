//! TLS material of the three binaries: where each PEM item comes from (a
//! file given by flag, env or config file, or inline content from a config
//! file), the choice between mTLS and `--insecure`, loading with errors that
//! name the item and the file, and the identity (CN and SAN DNS names) a
//! certificate carries. The only I/O here is reading the PEM files.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};

/// Why TLS material cannot be used; each names the PEM item and, for a
/// file, the file (`what`, e.g. `key_pem file '/etc/ank/key.pem'`).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be opened or read.
    #[error("cannot read {what}: {cause}")]
    Read { what: String, cause: std::io::Error },
    /// The mode of a PEM file cannot be read.
    #[error("cannot read the permissions of {what}: {cause}")]
    Permissions { what: String, cause: std::io::Error },
    /// A PEM file others may change (or read, for a key).
    #[error(transparent)]
    InsecureMode(#[from] InsecureMode),
    /// The key item holds no private key.
    #[error("{what}: no usable private key: {reason}")]
    NoKey { what: String, reason: String },
    /// A certificate item is no PEM text.
    #[error("{what}: not a valid PEM certificate: {reason}")]
    BadPem { what: String, reason: String },
    /// A certificate item holds no certificate.
    #[error("{what}: no certificate found (expected '-----BEGIN CERTIFICATE-----')")]
    NoCertificate { what: String },
    /// Our certificate is no X.509 certificate.
    #[error("{what}: cannot parse the certificate: {reason}")]
    Unparsable { what: String, reason: String },
    /// Our certificate's validity ended.
    #[error("{what}: the certificate expired on {not_after}")]
    Expired { what: String, not_after: String },
    /// Our certificate's validity has not begun.
    #[error("{what}: the certificate is not valid before {not_before}")]
    NotYetValid { what: String, not_before: String },
    /// A revocation list is no PEM text.
    #[error("unreadable revocation list: {reason}")]
    UnreadableCrl { reason: String },
    /// The revocation list file holds none.
    #[error("no revocation list (X509 CRL) found")]
    NoCrl,
    /// A certificate whose names are asked for is no X.509 certificate.
    #[error("cannot parse certificate: {reason}")]
    UnparsableNames { reason: String },
    /// Its subject alternative names cannot be read.
    #[error("cannot read the subject alt names: {reason}")]
    SubjectAltNames { reason: String },
}

/// For callers that still report errors as text.
impl From<TlsError> for String {
    fn from(e: TlsError) -> Self {
        e.to_string()
    }
}

/// A PEM file with a mode Ankaios refuses ([`check_mode`]), naming the
/// file, its mode and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} has insecure permissions {mode:o}: {rule}; fix it with 'chmod 0600' on the file")]
pub struct InsecureMode {
    what: String,
    mode: u32,
    rule: &'static str,
}

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

    /// A file's text, once its mode passes [`check_mode`] (checked on the
    /// opened file, so the file read is the file checked).
    fn read(&self, item: &str) -> Result<Vec<u8>, TlsError> {
        use std::io::Read;
        match self {
            PemSource::File(p) => {
                let what = self.describe(item).replacen(' ', " file ", 1);
                let read = |cause| TlsError::Read { what: what.clone(), cause };
                let mut file = std::fs::File::open(p).map_err(read)?;
                let meta = file.metadata().map_err(|cause| TlsError::Permissions { what: what.clone(), cause })?;
                let kind = if item == "key_pem" { PemKind::PrivateKey } else { PemKind::Certificate };
                check_mode(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()), kind, &what)?;
                let mut text = Vec::new();
                file.read_to_end(&mut text).map_err(read)?;
                Ok(text)
            }
            PemSource::Content(c) => Ok(c.as_bytes().to_vec()),
        }
    }
}

/// What a PEM file holds, for the modes it may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PemKind {
    PrivateKey,
    Certificate,
}

/// The file modes Ankaios accepts: a private key exactly 0600 or 0400; a
/// certificate (our own or the CA's) readable by its owner, writable by
/// nobody else, and not executable. Anything else is refused, naming the
/// file, its mode and the fix.
pub fn check_mode(mode: u32, kind: PemKind, what: &str) -> Result<(), InsecureMode> {
    let mode = mode & 0o777;
    let ok = match kind {
        PemKind::PrivateKey => mode == 0o600 || mode == 0o400,
        PemKind::Certificate => mode & 0o400 != 0 && mode & 0o022 == 0 && mode & 0o111 == 0,
    };
    if ok {
        return Ok(());
    }
    let rule = match kind {
        PemKind::PrivateKey => "a private key must have mode 0600 or 0400",
        PemKind::Certificate => {
            "a certificate must be readable by its owner, not writable by group or others, and not executable (0600, 0400 or 0644)"
        }
    };
    Err(InsecureMode { what: what.to_owned(), mode, rule })
}

/// The three PEM items of an mTLS set-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSources {
    pub ca: PemSource,
    pub crt: PemSource,
    pub key: PemSource,
}

/// Neither a complete mTLS set-up nor `--insecure`: Ankaios' refusal,
/// naming what was given for each item (`""` for a missing one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Either provide mTLS config via the '--ca_pem {ca}', '--crt_pem {crt}' and '--key_pem {key}' options \
     or deactivate mTLS with the '--insecure' option!"
)]
pub struct MissingCertificates {
    ca: String,
    crt: String,
    key: String,
}

impl MissingCertificates {
    /// How the daemons report it at start (Ankaios' log line).
    pub fn daemon_message(&self) -> String {
        format!("Missing certificate files: '{self}'")
    }

    /// How `ank` reports it.
    pub fn cli_message(&self) -> String {
        format!("Missing certificate files: {self}")
    }
}

/// What Ankaios warns when `--insecure` and all three PEM items are given.
pub const INSECURE_AND_SECURE: &str =
    "Insecure and secure flags specified at the same time. Defaulting to secure communication.";

/// Decides between mTLS and plain connections as Ankaios does: all three
/// PEM items mean mTLS (even with `--insecure`, see [`conflict`]);
/// `--insecure` without any of them means plain connections; anything else
/// (nothing at all, or only some of the items) is refused.
pub fn choose(
    insecure: bool,
    ca: Option<PemSource>,
    crt: Option<PemSource>,
    key: Option<PemSource>,
) -> Result<Option<TlsSources>, MissingCertificates> {
    match (insecure, ca, crt, key) {
        (_, Some(ca), Some(crt), Some(key)) => Ok(Some(TlsSources { ca, crt, key })),
        (true, None, None, None) => Ok(None),
        (_, ca, crt, key) => {
            let shown = |item: Option<PemSource>, name: &str| match item {
                None => "\"\"".to_owned(),
                Some(PemSource::File(p)) => p.display().to_string(),
                Some(PemSource::Content(_)) => format!("<{name}_content>"),
            };
            Err(MissingCertificates { ca: shown(ca, "ca_pem"), crt: shown(crt, "crt_pem"), key: shown(key, "key_pem") })
        }
    }
}

/// The warning for `--insecure` given together with PEM items, if it applies.
pub fn conflict(insecure: bool, ca: bool, crt: bool, key: bool) -> Option<&'static str> {
    (insecure && (ca || crt || key)).then_some(INSECURE_AND_SECURE)
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
    pub fn load(&self) -> Result<TlsMaterial, TlsError> {
        let ca_pem = self.ca.read("ca_pem")?;
        let crt_pem = self.crt.read("crt_pem")?;
        let key_pem = self.key.read("key_pem")?;
        let ca = certificates(&ca_pem, &self.ca.describe("ca_pem"))?;
        let chain = certificates(&crt_pem, &self.crt.describe("crt_pem"))?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| TlsError::NoKey { what: self.key.describe("key_pem"), reason: e.to_string() })?;
        check_validity(&chain[0], &self.crt.describe("crt_pem"))?;
        Ok(TlsMaterial { ca, chain, key, ca_pem, crt_pem, key_pem })
    }

    /// Loads the items for a client's connection (checked as by
    /// [`load`](Self::load)). The server's certificate must be issued to
    /// `ank-server`, as Ankaios' clients require, or with `check_url_host`
    /// to the host of the URL dialled.
    pub fn client_pem(&self, check_url_host: bool) -> Result<ank_proto::dial::ClientPem, TlsError> {
        let m = self.load()?;
        let server_name = (!check_url_host).then(|| ank_proto::dial::ANKAIOS_SERVER_NAME.to_owned());
        Ok(ank_proto::dial::ClientPem { ca: m.ca_pem, crt: m.crt_pem, key: m.key_pem, server_name, crl: None })
    }
}

/// The certificate revocation lists (`X509 CRL` blocks) of a PEM text;
/// an error when there is none or one is malformed.
pub fn revocation_lists(pem: &[u8]) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let crls = CertificateRevocationListDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::UnreadableCrl { reason: e.to_string() })?;
    if crls.is_empty() {
        return Err(TlsError::NoCrl);
    }
    Ok(crls)
}

fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::BadPem { what: what.to_owned(), reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what: what.to_owned() });
    }
    Ok(certs)
}

// A certificate's validity is judged by the system's wall clock as it is
// now (rustls does the same), not by a clock pinned at the daemon's start.
#[allow(clippy::disallowed_methods)]
fn check_validity(cert: &CertificateDer<'_>, what: &str) -> Result<(), TlsError> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| TlsError::Unparsable { what: what.to_owned(), reason: e.to_string() })?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default();
    let validity = parsed.validity();
    if now > validity.not_after.timestamp() {
        return Err(TlsError::Expired { what: what.to_owned(), not_after: validity.not_after.to_string() });
    }
    if now < validity.not_before.timestamp() {
        return Err(TlsError::NotYetValid { what: what.to_owned(), not_before: validity.not_before.to_string() });
    }
    Ok(())
}

/// The names in a certificate: its subject CNs, and its SAN DNS names
/// (`None` when it has no subject alternative name extension at all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertNames {
    pub common_names: Vec<String>,
    pub san_dns: Option<Vec<String>>,
}

impl CertNames {
    /// Reads the names of a DER certificate.
    pub fn of(cert: &[u8]) -> Result<Self, TlsError> {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert)
            .map_err(|e| TlsError::UnparsableNames { reason: e.to_string() })?;
        let common_names =
            parsed.subject().iter_common_name().filter_map(|cn| cn.as_str().ok().map(str::to_owned)).collect();
        let san = parsed.subject_alternative_name().map_err(|e| TlsError::SubjectAltNames { reason: e.to_string() })?;
        let san_dns = san.map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    x509_parser::extensions::GeneralName::DNSName(dns) => Some((*dns).to_owned()),
                    _ => None,
                })
                .collect()
        });
        Ok(Self { common_names, san_dns })
    }

    /// The CNs, then the SAN DNS names, without duplicates.
    pub fn all(&self) -> Vec<String> {
        let mut names: Vec<String> = self.common_names.iter().chain(self.san_dns.iter().flatten()).cloned().collect();
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        names
    }
}

/// The names a certificate is issued to: its subject CNs, then its SAN DNS
/// names, without duplicates.
pub fn identity_names(cert: &[u8]) -> Result<Vec<String>, TlsError> {
    CertNames::of(cert).map(|names| names.all())
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
        assert_eq!(choose(true, None, None, None), Ok(None));
        let e = choose(false, None, None, None).unwrap_err();
        assert_eq!(
            e.daemon_message(),
            "Missing certificate files: 'Either provide mTLS config via the '--ca_pem \"\"', '--crt_pem \"\"' \
             and '--key_pem \"\"' options or deactivate mTLS with the '--insecure' option!'"
        );
        let all = choose(false, file("ca"), file("crt"), Some(PemSource::Content("KEY".into()))).unwrap();
        assert_eq!(all.unwrap().key, PemSource::Content("KEY".into()));
        assert_eq!(
            choose(false, file("/c/ca.pem"), None, Some(PemSource::Content("KEY".into()))).unwrap_err().cli_message(),
            "Missing certificate files: Either provide mTLS config via the '--ca_pem /c/ca.pem', '--crt_pem \"\"' \
             and '--key_pem <key_pem_content>' options or deactivate mTLS with the '--insecure' option!",
            "a path is shown, inline content never"
        );
    }

    #[test]
    fn pem_modes_are_checked_as_ankaios_checks_them() {
        use PemKind::{Certificate, PrivateKey};
        for ok in [0o600, 0o400, 0o100600] {
            assert_eq!(check_mode(ok, PrivateKey, "k"), Ok(()), "{ok:o}");
        }
        for bad in [0o644, 0o640, 0o604, 0o700, 0o200, 0o000, 0o660, 0o666] {
            let e = check_mode(bad, PrivateKey, "key_pem file 'k'").unwrap_err().to_string();
            assert!(e.contains(&format!("'k' has insecure permissions {:o}", bad & 0o777)), "{e}");
            assert!(e.contains("0600 or 0400") && e.contains("chmod 0600"), "{e}");
        }
        for ok in [0o644, 0o600, 0o400, 0o444, 0o640, 0o604] {
            assert_eq!(check_mode(ok, Certificate, "c"), Ok(()), "{ok:o}");
        }
        for bad in [0o664, 0o646, 0o666, 0o755, 0o700, 0o644 | 0o001, 0o244, 0o000] {
            let e = check_mode(bad, Certificate, "crt_pem file 'c'").unwrap_err().to_string();
            assert!(e.contains("insecure permissions") && e.contains("not writable by group or others"), "{e}");
        }
    }

    #[test]
    fn pem_files_with_loose_modes_are_refused_before_they_are_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n);
        let set =
            |n: &str, mode: u32| std::fs::set_permissions(path(n), std::fs::Permissions::from_mode(mode)).unwrap();
        for n in ["ca.pem", "crt.pem", "key.pem"] {
            std::fs::write(path(n), "not read").unwrap();
        }
        let sources = TlsSources {
            ca: PemSource::File(path("ca.pem")),
            crt: PemSource::File(path("crt.pem")),
            key: PemSource::File(path("key.pem")),
        };
        set("key.pem", 0o644);
        let e = sources.load().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("key_pem file '{}' has insecure permissions 644", path("key.pem").display())),
            "{e}"
        );
        set("key.pem", 0o600);
        set("ca.pem", 0o666);
        let e = sources.load().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("ca_pem file '{}' has insecure permissions 666", path("ca.pem").display())),
            "{e}"
        );
        set("ca.pem", 0o644);
        set("crt.pem", 0o755);
        assert!(sources.load().unwrap_err().to_string().contains("crt_pem file"));
        set("crt.pem", 0o400);
        // The modes pass; the content is what is wrong now.
        let e = sources.load().unwrap_err().to_string();
        assert!(e.contains("no certificate found"), "{e}");
        // Inline content has no file mode to check.
        let inline = TlsSources { key: PemSource::Content("x".into()), ..sources };
        assert!(inline.load().unwrap_err().to_string().contains("no certificate found"));
    }

    #[test]
    fn all_three_items_win_over_insecure_with_a_warning() {
        let chosen = choose(true, file("ca"), file("crt"), file("key")).unwrap();
        assert!(chosen.is_some(), "Ankaios defaults to secure communication");
        assert_eq!(conflict(true, true, true, true), Some(INSECURE_AND_SECURE));
        assert!(choose(true, file("ca"), None, None).is_err(), "--insecure with some items is refused");
        assert_eq!(conflict(true, true, false, false), Some(INSECURE_AND_SECURE));
        assert_eq!(conflict(false, true, true, true), None);
        assert_eq!(conflict(true, false, false, false), None);
    }
}
