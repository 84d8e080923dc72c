//! The command line of `ank-certs`, in the library so that `ank-docgen`
//! writes its man page from the same model.

use std::path::PathBuf;

use clap::Parser;

/// Creates a CA and server, agent and CLI certificates for mTLS.
#[derive(Debug, Parser)]
#[command(name = "ank-certs", version)]
pub struct Args {
    /// Folder for the files; an existing ca.pem + ca-key.pem there is reused.
    #[arg(short, long, value_name = "DIR")]
    pub out: PathBuf,
    /// Issue server.pem / server-key.pem.
    #[arg(long)]
    pub server: bool,
    /// More subject alternative names of the server certificate (DNS names
    /// or IPs). `ank-server`, the name agents and `ank` check (as in
    /// Ankaios), is always one of them; the others serve clients told to
    /// check the host of the server URL.
    #[arg(long = "server-san", value_delimiter = ',', default_value = "localhost,127.0.0.1")]
    pub server_san: Vec<String>,
    /// Issue agent-NAME.pem / agent-NAME-key.pem (CN and SAN = the agent name).
    #[arg(long = "agent", value_name = "NAME")]
    pub agents: Vec<String>,
    /// Issue cli-NAME.pem / cli-NAME-key.pem (CN = NAME).
    #[arg(long = "cli", value_name = "NAME")]
    pub clis: Vec<String>,
    /// Validity of the issued certificates in days.
    #[arg(long, default_value_t = 365)]
    pub days: u32,
}
