//! `ank-fleet-connector`: see [`ank_fleet::connector`].

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args = ank_fleet::connector::config::ConnectorArgs::parse();
    ank_fleet::init_logging(&args.log_level);
    match ank_fleet::connector::run(args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ank-fleet-connector: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
