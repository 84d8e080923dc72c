//! Certificates for mTLS between the three binaries: a [`Ca`] that issues
//! server certificates (SANs for the addresses agents and `ank` dial) and
//! client certificates whose CN (and SAN) is the agent's or CLI user's
//! name, which the server binds the connection's identity to. Used by the
//! `ank-certs` tool and by the TLS tests (including expired and foreign
//! certificates for the negative cases).

use std::net::IpAddr;

pub mod cli;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `ank-server`: server authentication.
    Server,
    /// `ank-agent` or `ank`: client authentication.
    Client,
}

/// Validity of an issued certificate.
#[derive(Debug, Clone, Copy)]
pub enum Validity {
    /// From yesterday for this many days.
    Days(u32),
    /// Expired: valid only during 2020.
    Expired,
}

/// A certificate authority.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl Ca {
    /// A new self-signed CA named `name`, valid for ten years.
    pub fn new(name: &str) -> anyhow::Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        set_validity(&mut params, Validity::Days(3650));
        let cert = params.self_signed(&key)?;
        let key_pem = key.serialize_pem();
        Ok(Self { issuer: Issuer::new(params, key), cert_pem: cert.pem(), key_pem })
    }

    /// A CA from its certificate and key (PEM), to issue more certificates.
    pub fn load(cert_pem: &str, key_pem: &str) -> anyhow::Result<Self> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        let key_pem = key_pem.to_owned();
        Ok(Self { issuer, cert_pem: cert_pem.to_owned(), key_pem })
    }

    /// The CA certificate (PEM): what every party trusts.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key (PEM); keep it off the vehicle.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// Issues a certificate with CN `name` for `role`. Each of `sans` becomes
    /// an IP or DNS subject alternative name; a client's own name is added
    /// as a DNS SAN when it is a valid one.
    pub fn issue(&self, role: Role, name: &str, sans: &[String], validity: Validity) -> anyhow::Result<Issued> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        for san in sans {
            params.subject_alt_names.push(match san.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(san.as_str().try_into()?),
            });
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![match role {
            Role::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Role::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        set_validity(&mut params, validity);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

impl Ca {
    /// A certificate revocation list (PEM) signed by this CA that revokes
    /// the certificates `revoked` (PEM, issued by this CA), valid from
    /// yesterday for `days` days; `number` is the CRL's sequence number.
    pub fn revocation_list(&self, revoked: &[&str], number: u64, days: u32) -> anyhow::Result<String> {
        let now = std::time::SystemTime::now();
        let day = std::time::Duration::from_secs(86_400);
        let revoked_certs = revoked
            .iter()
            .map(|pem| {
                let (_, der) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
                    .map_err(|e| anyhow::anyhow!("not a PEM certificate: {e}"))?;
                let cert = der.parse_x509().map_err(|e| anyhow::anyhow!("not a certificate: {e}"))?;
                let serial = rcgen::SerialNumber::from(cert.raw_serial().to_vec());
                Ok(rcgen::RevokedCertParams {
                    serial_number: serial,
                    revocation_time: (now - day).into(),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let params = rcgen::CertificateRevocationListParams {
            this_update: (now - day).into(),
            next_update: (now + day * days.max(1)).into(),
            crl_number: rcgen::SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs,
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        Ok(params.signed_by(&self.issuer)?.pem()?)
    }
}

fn set_validity(params: &mut CertificateParams, validity: Validity) {
    match validity {
        Validity::Days(days) => {
            let now = std::time::SystemTime::now();
            params.not_before = (now - std::time::Duration::from_secs(86_400)).into();
            params.not_after = (now + std::time::Duration::from_secs(86_400 * u64::from(days))).into();
        }
        Validity::Expired => {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 12, 31);
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::tls::{PemSource, TlsSources, identity_names};

    use super::*;

    fn sources(dir: &std::path::Path, ca: &Ca, issued: &Issued) -> TlsSources {
        std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
        std::fs::write(dir.join("crt.pem"), &issued.cert_pem).unwrap();
        TlsSources {
            ca: PemSource::File(dir.join("ca.pem")),
            crt: PemSource::File(dir.join("crt.pem")),
            key: PemSource::Content(issued.key_pem.clone().into()),
        }
    }

    #[test]
    fn issued_certificates_load_and_carry_their_names() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("test CA").unwrap();
        let agent = ca.issue(Role::Client, "agent_A", &["agent-a.local".into()], Validity::Days(30)).unwrap();
        let loaded = sources(dir.path(), &ca, &agent).load().unwrap();
        assert_eq!(loaded.chain.len(), 1);
        assert_eq!(identity_names(&loaded.chain[0]).unwrap(), vec!["agent_A", "agent-a.local"]);

        // A CA loaded from its files issues certificates too.
        let again = Ca::load(ca.cert_pem(), ca.key_pem()).unwrap();
        let server = again
            .issue(Role::Server, "ank-server", &["localhost".into(), "127.0.0.1".into()], Validity::Days(1))
            .unwrap();
        let loaded = sources(dir.path(), &again, &server).load().unwrap();
        assert_eq!(identity_names(&loaded.chain[0]).unwrap(), vec!["ank-server", "localhost"]);
    }

    #[test]
    fn expired_or_broken_material_is_refused_naming_the_item() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new("test CA").unwrap();
        let old = ca.issue(Role::Client, "agent_A", &[], Validity::Expired).unwrap();
        let e = sources(dir.path(), &ca, &old).load().unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("crt_pem '{}': the certificate expired on", dir.path().join("crt.pem").display())),
            "{e}"
        );

        let good = ca.issue(Role::Client, "agent_A", &[], Validity::Days(1)).unwrap();
        let mut s = sources(dir.path(), &ca, &good);
        s.key = PemSource::Content("not a key".into());
        assert!(s.load().unwrap_err().to_string().starts_with("key_pem_content: no usable private key"));
        s.key = PemSource::File(dir.path().join("missing.pem"));
        let e = s.load().unwrap_err().to_string();
        assert!(e.starts_with("cannot read key_pem file") && e.contains("missing.pem"), "{e}");
        std::fs::write(dir.path().join("ca.pem"), "hello").unwrap();
        s.key = PemSource::Content(good.key_pem.into());
        let e = s.load().unwrap_err().to_string();
        assert!(e.contains("ca_pem") && e.contains("no certificate found"), "{e}");
    }
}
