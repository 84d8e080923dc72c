//! The `ank` binary: answers shell completion (`COMPLETE=<shell> ank`),
//! parses the command line and the config file, runs the command on a single-threaded runtime
//! (one call should be cheap) and turns errors into a message on stderr and
//! a non-zero exit code.

use std::process::ExitCode;

use clap::CommandFactory;

fn main() -> ExitCode {
    // `COMPLETE=bash ank` prints the shell code; the shell then calls back here.
    clap_complete::CompleteEnv::with_factory(ank_cli::cli::Cli::command).complete();
    let cli = match ank_cli::config_file::parse_cli() {
        Ok((cli, loaded)) => {
            let warnings = loaded.warnings.iter().map(String::as_str).chain(cli.tls_conflict());
            warnings.for_each(|w| eprintln!("warn: {w}"));
            cli
        }
        Err(e) => {
            eprintln!("error: Config file could not be parsed: '{e}'");
            return ExitCode::from(ank_cli::config_file::EXIT_BAD_CONFIG);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(ank_cli::EXIT_FAILURE);
        }
    };
    let mut stdout = std::io::stdout().lock();
    match runtime.block_on(ank_cli::run(cli, &mut stdout)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            if let Some(message) = ank_cli::error_message(&err) {
                eprintln!("{message}");
            }
            ExitCode::from(ank_cli::exit_code(&err))
        }
    }
}
