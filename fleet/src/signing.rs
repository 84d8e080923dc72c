//! Signed desired-state messages: the operator signs each `desired`
//! message with an Ed25519 key; the connector verifies it with the
//! operator's public key. What is signed binds the message to one vehicle
//! and one sequence number, so a broker can neither forge a manifest, nor
//! hand one vehicle's message to another, nor (with the sequence floor the
//! connector keeps) replay an older one. Keys are PEM files: the private
//! key as PKCS#8 (`PRIVATE KEY`, as `ank-fleet keygen` or `openssl genpkey
//! -algorithm ed25519` writes it), the public key as `PUBLIC KEY` (SPKI).

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, SubjectPublicKeyInfoDer};

use crate::payload::Desired;

/// The file names `ank-fleet keygen` writes.
pub const PRIVATE_KEY_FILE: &str = "fleet-signing-key.pem";
pub const PUBLIC_KEY_FILE: &str = "fleet-signing-pub.pem";

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32
/// key bytes follow it.
const SPKI_PREFIX: [u8; 12] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];
/// Separates what is signed here from any other use of the key.
const CONTEXT: &[u8] = b"ank-fleet desired v1\0";

/// Why a key cannot be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read {what} '{path}': {reason}")]
    Read { what: &'static str, path: PathBuf, reason: String },
    #[error("'{path}' is not an Ed25519 {what}: {reason}")]
    NotEd25519 { what: &'static str, path: PathBuf, reason: String },
    #[error("cannot write '{path}': {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("'{0}' exists already; keygen does not overwrite a key")]
    Exists(PathBuf),
    #[error("cannot generate a key: the system's random source failed")]
    Random,
}

/// Why a desired message is not accepted as the operator's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "unsigned desired message refused: this connector accepts only messages signed with the operator key \
         (--operator-key); run it with --allow-unsigned to accept unsigned ones"
    )]
    Unsigned,
    #[error("desired message signed for vehicle '{signed_for}' refused: this is vehicle '{this}'")]
    WrongVehicle { signed_for: String, this: String },
    #[error("desired message refused: its signature is not valid base64 of 64 bytes")]
    Malformed,
    #[error("desired message refused: its signature does not verify with the operator key (forged or altered)")]
    BadSignature,
}

/// The bytes a signature covers: a context string, then the vehicle, the
/// sequence number, the rollout id and the manifest, each with its length,
/// so no two different messages have the same bytes.
pub fn signed_bytes(d: &Desired) -> Vec<u8> {
    let seq = d.seq.to_string();
    let mut out = Vec::with_capacity(CONTEXT.len() + 64 + d.manifest.len());
    out.extend_from_slice(CONTEXT);
    for field in [d.vehicle.as_bytes(), seq.as_bytes(), d.rollout_id.as_bytes(), d.manifest.as_bytes()] {
        out.extend_from_slice(&(field.len() as u64).to_be_bytes());
        out.extend_from_slice(field);
    }
    out
}

/// The operator's private key.
pub struct SigningKey {
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("public", &STANDARD.encode(self.pair.public_key().as_ref())).finish()
    }
}

impl SigningKey {
    /// Reads a PKCS#8 Ed25519 key (v1 as openssl writes it, or v2).
    pub fn from_pem_file(path: &Path) -> Result<Self, KeyError> {
        let what = "signing key";
        let der = PrivateKeyDer::from_pem_file(path).map_err(|e| KeyError::Read {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let PrivateKeyDer::Pkcs8(pkcs8) = der else {
            return Err(KeyError::NotEd25519 { what, path: path.to_owned(), reason: "not a PKCS#8 key".into() });
        };
        Self::from_pkcs8(pkcs8.secret_pkcs8_der()).map_err(|reason| KeyError::NotEd25519 {
            what,
            path: path.to_owned(),
            reason,
        })
    }

    /// A key from PKCS#8 DER.
    pub fn from_pkcs8(der: &[u8]) -> Result<Self, String> {
        Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).map(|pair| Self { pair }).map_err(|e| e.to_string())
    }

    /// The public key that verifies this key's signatures.
    pub fn verifying_key(&self) -> VerifyingKey {
        let mut raw = [0u8; 32];
        raw.copy_from_slice(self.pair.public_key().as_ref());
        VerifyingKey { raw }
    }

    /// Signs `d` for `vehicle` with sequence number `seq` (sets all three fields).
    pub fn sign(&self, d: &mut Desired, vehicle: &str, seq: u64) {
        d.vehicle = vehicle.to_owned();
        d.seq = seq;
        d.signature = STANDARD.encode(self.pair.sign(&signed_bytes(d)).as_ref());
    }
}

/// The operator's public key, as the connector holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyingKey {
    raw: [u8; 32],
}

impl VerifyingKey {
    /// Reads a `PUBLIC KEY` PEM file holding an Ed25519 key.
    pub fn from_pem_file(path: &Path) -> Result<Self, KeyError> {
        let what = "public key";
        let spki = SubjectPublicKeyInfoDer::from_pem_file(path).map_err(|e| KeyError::Read {
            what,
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        Self::from_spki(spki.as_ref()).ok_or_else(|| KeyError::NotEd25519 {
            what,
            path: path.to_owned(),
            reason: "expected the 44-byte SubjectPublicKeyInfo of an Ed25519 key".into(),
        })
    }

    fn from_spki(der: &[u8]) -> Option<Self> {
        let key = der.strip_prefix(&SPKI_PREFIX[..])?;
        Some(Self { raw: key.try_into().ok()? })
    }

    /// The key as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        let mut der = SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.raw);
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", STANDARD.encode(der))
    }

    /// Checks that `d` is signed by this key for `vehicle`.
    pub fn verify(&self, d: &Desired, vehicle: &str) -> Result<(), VerifyError> {
        if d.signature.is_empty() {
            return Err(VerifyError::Unsigned);
        }
        if d.vehicle != vehicle {
            return Err(VerifyError::WrongVehicle { signed_for: d.vehicle.clone(), this: vehicle.to_owned() });
        }
        let signature = STANDARD.decode(&d.signature).ok().filter(|s| s.len() == 64).ok_or(VerifyError::Malformed)?;
        UnparsedPublicKey::new(&ED25519, &self.raw)
            .verify(&signed_bytes(d), &signature)
            .map_err(|_| VerifyError::BadSignature)
    }
}

/// Makes a new key pair: the private key as PKCS#8 PEM, and its public key.
pub fn generate() -> Result<(String, VerifyingKey), KeyError> {
    let der = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).map_err(|_| KeyError::Random)?;
    let key = SigningKey::from_pkcs8(der.as_ref()).map_err(|_| KeyError::Random)?;
    let body = STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
    Ok((pem, key.verifying_key()))
}

/// Writes a new key pair into `dir` ([`PRIVATE_KEY_FILE`] with mode 0600,
/// [`PUBLIC_KEY_FILE`]); refuses to overwrite either. Returns both paths.
pub fn keygen(dir: &Path) -> Result<(PathBuf, PathBuf), KeyError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let (private, public) = (dir.join(PRIVATE_KEY_FILE), dir.join(PUBLIC_KEY_FILE));
    for path in [&private, &public] {
        if path.exists() {
            return Err(KeyError::Exists(path.clone()));
        }
    }
    std::fs::create_dir_all(dir).map_err(|source| KeyError::Write { path: dir.to_owned(), source })?;
    let (pem, verifying) = generate()?;
    let write = |path: &Path, mode: u32, text: &str| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
        file.write_all(text.as_bytes())
    };
    write(&private, 0o600, &pem).map_err(|source| KeyError::Write { path: private.clone(), source })?;
    write(&public, 0o644, &verifying.to_pem()).map_err(|source| KeyError::Write { path: public.clone(), source })?;
    Ok((private, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired(id: &str) -> Desired {
        Desired::unsigned(id, "apiVersion: v1\n")
    }

    #[test]
    fn a_signed_message_verifies_for_its_vehicle_only() {
        let dir = tempfile::tempdir().unwrap();
        let (private, public) = keygen(dir.path()).unwrap();
        let key = SigningKey::from_pem_file(&private).unwrap();
        let verifying = VerifyingKey::from_pem_file(&public).unwrap();
        assert_eq!(key.verifying_key(), verifying);
        let mut d = desired("r1");
        key.sign(&mut d, "v01", 7);
        assert_eq!(verifying.verify(&d, "v01"), Ok(()));
        assert!(matches!(verifying.verify(&d, "v02"), Err(VerifyError::WrongVehicle { .. })));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(matches!(keygen(dir.path()), Err(KeyError::Exists(_))), "never overwrites a key");
    }

    #[test]
    fn each_signed_field_is_covered() {
        let (pem, verifying) = generate().unwrap();
        let der = PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        let key = SigningKey::from_pkcs8(der.secret_der()).unwrap();
        let mut d = desired("r1");
        key.sign(&mut d, "v01", 7);
        let changes: [fn(&mut Desired); 4] =
            [|d| d.seq += 1, |d| d.rollout_id.push('x'), |d| d.manifest.push(' '), |d| d.vehicle = "v0".into()];
        for change in changes {
            let mut altered = d.clone();
            change(&mut altered);
            let this = altered.vehicle.clone();
            assert_eq!(verifying.verify(&altered, &this), Err(VerifyError::BadSignature), "{altered:?}");
        }
        let mut other = d.clone();
        other.signature = "abc".into();
        assert_eq!(verifying.verify(&other, "v01"), Err(VerifyError::Malformed));
        assert_eq!(verifying.verify(&desired("r1"), "v01"), Err(VerifyError::Unsigned));
    }

    #[test]
    fn an_openssl_style_key_is_read_and_a_wrong_key_type_is_named() {
        // `openssl genpkey -algorithm ed25519` (PKCS#8 v1, no public key inside).
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEII4vk4GYt5cK0O1OLp9o9OwxKsiKBqgGdaHlMJeVgd+9\n-----END PRIVATE KEY-----\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.pem");
        std::fs::write(&path, pem).unwrap();
        let key = SigningKey::from_pem_file(&path).unwrap();
        let public = dir.path().join("p.pem");
        std::fs::write(&public, key.verifying_key().to_pem()).unwrap();
        assert_eq!(VerifyingKey::from_pem_file(&public).unwrap(), key.verifying_key());
        let text = VerifyingKey::from_pem_file(&path).unwrap_err().to_string();
        assert!(text.contains("cannot read public key"), "{text}");
    }
}
