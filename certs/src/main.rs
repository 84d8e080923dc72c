//! `ank-certs`: creates (or reuses) a CA in a folder and issues the
//! certificates mTLS needs: one for `ank-server`, one per agent name, one
//! per CLI user. Keys are written with mode 0600.

use std::path::Path;
use std::process::ExitCode;

use ank_certs::cli::Args;
use ank_certs::{Ca, Role, Validity};
use clap::Parser;

fn write(path: &Path, text: &str, secret: bool) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(mode).open(path)?;
    f.write_all(text.as_bytes())?;
    println!("{}", path.display());
    Ok(())
}

fn run(args: &Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let (ca_path, ca_key_path) = (args.out.join("ca.pem"), args.out.join("ca-key.pem"));
    let ca = if ca_path.exists() && ca_key_path.exists() {
        Ca::load(&std::fs::read_to_string(&ca_path)?, &std::fs::read_to_string(&ca_key_path)?)
            .map_err(|e| anyhow::anyhow!("cannot use the CA in {}: {e}", args.out.display()))?
    } else {
        let ca = Ca::new("ank CA")?;
        write(&ca_path, ca.cert_pem(), false)?;
        write(&ca_key_path, ca.key_pem(), true)?;
        ca
    };
    let validity = Validity::Days(args.days);
    let issue = |role, name: &str, sans: &[String], file: &str| -> anyhow::Result<()> {
        let issued = ca.issue(role, name, sans, validity)?;
        write(&args.out.join(format!("{file}.pem")), &issued.cert_pem, false)?;
        write(&args.out.join(format!("{file}-key.pem")), &issued.key_pem, true)
    };
    if args.server {
        issue(Role::Server, "ank-server", &server_sans(&args.server_san), "server")?;
    }
    for name in &args.agents {
        // The server admits an agent under the SAN DNS names of its certificate.
        issue(Role::Client, name, std::slice::from_ref(name), &format!("agent-{name}"))?;
    }
    for name in &args.clis {
        issue(Role::Client, name, &[], &format!("cli-{name}"))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-certs: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The server certificate's SANs: `ank-server` (the name clients check, as
/// in Ankaios) first, then the given names without repeating it.
fn server_sans(extra: &[String]) -> Vec<String> {
    let mut sans = vec!["ank-server".to_owned()];
    sans.extend(extra.iter().filter(|s| s.as_str() != "ank-server").cloned());
    sans
}

#[cfg(test)]
mod tests {
    use super::server_sans;

    #[test]
    fn the_server_certificate_always_names_ank_server() {
        let given = |v: &[&str]| server_sans(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(given(&["localhost", "127.0.0.1"]), ["ank-server", "localhost", "127.0.0.1"]);
        assert_eq!(given(&["ank-server", "10.0.0.1"]), ["ank-server", "10.0.0.1"]);
        assert_eq!(given(&[]), ["ank-server"]);
    }
}
