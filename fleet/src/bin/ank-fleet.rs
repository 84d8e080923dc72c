//! `ank-fleet`: see [`ank_fleet::cli`].

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = ank_fleet::cli::FleetArgs::parse();
    ank_fleet::init_logging("warn");
    match ank_fleet::cli::run(args).await {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("ank-fleet: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
