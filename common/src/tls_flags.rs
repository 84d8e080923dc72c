//! The connection flags that `ank-server`, `ank-agent` and `ank` share:
//! `-k, --insecure`, the mTLS items `--ca_pem`, `--crt_pem`, `--key_pem`
//! (with the config files' `*_pem_content`) and `--crl_pem`, as one clap
//! block ([`TlsArgs`]) each binary flattens into its command line. Names and
//! short flags are the same everywhere; what differs per binary (the
//! environment variables, the help texts, how a boolean variable is read,
//! whether the flags are global to subcommands) comes from its
//! [`TlsFlavor`]. The choice between mTLS and `--insecure` is made here once
//! (see [`crate::tls::choose`]).

use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::PathBuf;

use clap::builder::ValueParser;

use crate::tls::{self, PemSource, PemText, TlsSources};

/// What one binary's connection flags look like beyond their names.
pub trait TlsFlavor: Debug + Clone + Default + Send + Sync + 'static {
    /// Environment variable of `--insecure`.
    const INSECURE_ENV: &'static str;
    /// Environment variables of `--ca_pem`, `--crt_pem`, `--key_pem`, `--crl_pem`.
    const CA_PEM_ENV: &'static str;
    const CRT_PEM_ENV: &'static str;
    const KEY_PEM_ENV: &'static str;
    const CRL_PEM_ENV: &'static str;
    /// Help texts of the flags, in the same order.
    const INSECURE_HELP: &'static str;
    const CA_PEM_HELP: &'static str;
    const CRT_PEM_HELP: &'static str;
    const KEY_PEM_HELP: &'static str;
    const CRL_PEM_HELP: &'static str;
    /// Whether `--insecure` and `--crl_pem` may also stand after a subcommand.
    const GLOBAL: bool;
    /// How the value of `--insecure`'s environment variable is read.
    fn bool_parser() -> ValueParser;
}

/// The shared connection flags of one binary.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs<F: TlsFlavor> {
    #[arg(short = 'k', long = "insecure", env = F::INSECURE_ENV, help = F::INSECURE_HELP, global = F::GLOBAL,
          value_parser = F::bool_parser())]
    pub insecure: bool,
    #[arg(long = "ca_pem", env = F::CA_PEM_ENV, value_name = "PATH", help = F::CA_PEM_HELP)]
    pub ca_pem: Option<PathBuf>,
    #[arg(long = "crt_pem", env = F::CRT_PEM_ENV, value_name = "PATH", help = F::CRT_PEM_HELP)]
    pub crt_pem: Option<PathBuf>,
    #[arg(long = "key_pem", env = F::KEY_PEM_ENV, value_name = "PATH", help = F::KEY_PEM_HELP)]
    pub key_pem: Option<PathBuf>,
    #[arg(long = "crl_pem", env = F::CRL_PEM_ENV, value_name = "PATH", help = F::CRL_PEM_HELP, global = F::GLOBAL)]
    pub crl_pem: Option<PathBuf>,
    /// CA certificate itself, from the config file's `ca_pem_content`.
    #[arg(skip)]
    pub ca_pem_content: Option<PemText>,
    /// Certificate itself, from the config file's `crt_pem_content`.
    #[arg(skip)]
    pub crt_pem_content: Option<PemText>,
    /// Key itself, from the config file's `key_pem_content`.
    #[arg(skip)]
    pub key_pem_content: Option<PemText>,
    #[arg(skip)]
    flavor: PhantomData<F>,
}

impl<F: TlsFlavor> TlsArgs<F> {
    /// The mTLS set-up, `None` with `--insecure`; refused (as Ankaios
    /// does) unless all three PEM items or `--insecure` alone are given.
    pub fn sources(&self) -> Result<Option<TlsSources>, tls::MissingCertificates> {
        tls::choose(
            self.insecure,
            PemSource::from_parts(self.ca_pem.clone(), self.ca_pem_content.clone()),
            PemSource::from_parts(self.crt_pem.clone(), self.crt_pem_content.clone()),
            PemSource::from_parts(self.key_pem.clone(), self.key_pem_content.clone()),
        )
    }

    /// Ankaios' warning for `--insecure` given together with PEM items.
    pub fn conflict(&self) -> Option<&'static str> {
        let [ca, crt, key] = self.given();
        tls::conflict(self.insecure, ca, crt, key)
    }

    /// Whether all three PEM items are given (by path or content).
    pub fn pems_complete(&self) -> bool {
        self.given().iter().all(|given| *given)
    }

    fn given(&self) -> [bool; 3] {
        let given = |path: &Option<PathBuf>, content: &Option<PemText>| path.is_some() || content.is_some();
        [
            given(&self.ca_pem, &self.ca_pem_content),
            given(&self.crt_pem, &self.crt_pem_content),
            given(&self.key_pem, &self.key_pem_content),
        ]
    }
}
