//! `ank-docgen DIR`: writes the man pages of ank, ank-server, ank-agent and ank-certs
//! into DIR.

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: ank-docgen DIR");
        return ExitCode::from(2);
    };
    match ank_docgen::write_man_pages(std::path::Path::new(&dir)) {
        Ok(pages) => {
            for p in pages {
                println!("{}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ank-docgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}
