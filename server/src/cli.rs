//! Command line of `ank-server`, with the flags and environment variables of
//! Ankaios' server.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// The Ankaios-compatible server.
#[derive(Debug, Parser)]
#[command(name = "ank-server", version, about = "Holds the desired state and serves agents and the ank CLI")]
pub struct Args {
    /// Manifest loaded as the initial desired state.
    #[arg(short = 'm', long = "startup-manifest", visible_alias = "startup-config", value_name = "PATH")]
    pub startup_manifest: Option<PathBuf>,
    /// Address to listen on, with port.
    #[arg(short = 'a', long = "address", default_value = "127.0.0.1:25551", value_name = "ADDR")]
    pub address: SocketAddr,
    /// Serve without TLS.
    #[arg(short = 'k', long = "insecure", env = "ANKSERVER_INSECURE")]
    pub insecure: bool,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it.
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
}

impl Args {
    /// Checks combinations clap cannot express.
    pub fn validate(&self) -> Result<(), String> {
        if !self.insecure {
            return Err("TLS is not available in this build yet: start ank-server with --insecure (-k) \
                 or set ANKSERVER_INSECURE=true"
                .to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_defaults_and_insecure_requirement() {
        let a = Args::try_parse_from(["ank-server"]).unwrap();
        assert_eq!(a.address.to_string(), "127.0.0.1:25551");
        assert!(a.validate().unwrap_err().contains("--insecure"));
        let a = Args::try_parse_from(["ank-server", "-k", "-a", "0.0.0.0:1", "-m", "x.yaml"]).unwrap();
        assert!(a.validate().is_ok());
        assert_eq!(a.startup_manifest.unwrap().to_str(), Some("x.yaml"));
    }
}
