//! `ank`, the command line interface of the Ankaios-compatible orchestrator,
//! as a library: argument definitions ([`cli`]), the server connection
//! ([`connection`]), one module per verb ([`cmd`]), the wait mode
//! ([`wait`]) and the printers ([`output`]). The binary only parses the
//! arguments, runs [`run`] on a single-threaded runtime and maps errors to
//! exit codes with [`exit_code`].

pub mod cli;
pub mod cmd;
pub mod completers;
pub mod config_file;
pub mod connection;
pub mod error_text;
pub mod job_wait;
pub mod manifest_scan;
pub mod manifest_schema;
pub mod output;
pub mod progress;
pub mod render;
pub mod signals;
pub mod table;
pub mod view;
pub mod wait;

use std::io::Write;

use crate::cli::{Cli, Command, DeleteCommand, DescribeCommand, GetCommand, RunCommand, SetCommand};
use crate::cmd::{Ctx, Settings};
use crate::error_text::{WriteCommand, reword};

/// Exit code of a request that failed or any other error.
pub const EXIT_FAILURE: u8 = 1;
/// Exit code when the server did not answer in time: a failure, as in Ankaios.
pub const EXIT_TIMEOUT: u8 = EXIT_FAILURE;

/// Runs the command of `cli`, writing its regular output to `out`.
pub async fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<()> {
    let mut ctx = Ctx { settings: Settings::from_cli(&cli), out };
    match cli.command {
        Command::Get(GetCommand::State(args)) => cmd::get_state::run(&mut ctx, args).await,
        Command::Get(GetCommand::Workload(args)) => cmd::get_workloads::run(&mut ctx, args).await,
        Command::Get(GetCommand::Agent(args)) => cmd::get_agents::run(&mut ctx, args.output).await,
        Command::Get(GetCommand::Config(args)) => cmd::get_configs::run(&mut ctx, args.output).await,
        Command::Get(GetCommand::Events(args)) => match args.workload_names() {
            Some(names) => cmd::workload_events::run(&mut ctx, names, args.output_format).await,
            None => cmd::get_events::run(&mut ctx, args).await,
        },
        Command::Describe(DescribeCommand::Workload { name }) => cmd::describe::workload(&mut ctx, &name).await,
        Command::Get(GetCommand::Group(args)) => cmd::get_groups::run(&mut ctx, args.output).await,
        Command::Get(GetCommand::Jobs(args)) => cmd::jobs::get_jobs(&mut ctx, args.output).await,
        Command::Get(GetCommand::Job(args)) => cmd::jobs::get_job(&mut ctx, args).await,
        Command::Job(command) => cmd::jobs::run(&mut ctx, command).await,
        Command::Delete(DeleteCommand::Workload { names }) => {
            cmd::delete_workloads::run(&mut ctx, &names).await.map_err(|e| reword(WriteCommand::DeleteWorkloads, e))
        }
        Command::Delete(DeleteCommand::Config { names }) => cmd::delete_configs::run(&mut ctx, &names).await,
        Command::Run(RunCommand::Workload(args)) => {
            cmd::run_workload::run(&mut ctx, args).await.map_err(|e| reword(WriteCommand::RunWorkload, e))
        }
        Command::Set(SetCommand::State(args)) => {
            cmd::set_state::run(&mut ctx, args).await.map_err(|e| reword(WriteCommand::SetState, e))
        }
        Command::Apply(args) => cmd::apply::run(&mut ctx, args).await.map_err(|e| reword(WriteCommand::Apply, e)),
        Command::Logs(args) => cmd::logs::run(&mut ctx, args).await,
        Command::Wait(args) => cmd::wait_condition::run(&mut ctx, args).await,
        Command::Completion { shell } => cmd::completion::run(&mut ctx, shell),
    }
}

/// The exit code for `err`: the shell's code of the signal that
/// interrupted a command, the config error code for unusable connection
/// settings (no certificates and no `--insecure`, unreadable PEM files),
/// else [`EXIT_FAILURE`] (a timeout too, as in Ankaios).
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if let Some(signal) = err.chain().find_map(|cause| cause.downcast_ref::<signals::Interrupted>()) {
        return signal.exit_code();
    }
    if err.chain().any(|cause| cause.downcast_ref::<cli::SettingsError>().is_some()) {
        return config_file::EXIT_BAD_CONFIG;
    }
    EXIT_FAILURE
}

/// The text to print for `err`: nothing for a command a signal ended (it
/// said goodbye and leaves quietly, as if the signal had ended it), a
/// manifest error exactly as the parser worded it, anything else as
/// `error: ` and its chain of causes.
pub fn error_message(err: &anyhow::Error) -> Option<String> {
    if err.chain().any(|cause| cause.downcast_ref::<signals::Interrupted>().is_some()) {
        return None;
    }
    Some(match err.downcast_ref::<ank_common::manifest::ManifestError>() {
        Some(manifest_error) => manifest_error.to_string(),
        None => format!("error: {err:#}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::ConnectionError;
    use std::time::Duration;

    #[test]
    fn exit_codes_are_ankaios_ones_and_signals_the_shells() {
        let timeout =
            anyhow::Error::new(ConnectionError::Timeout { what: "the response", after: Duration::from_millis(5) })
                .context("the state request failed");
        assert_eq!(exit_code(&timeout), 1, "Ankaios exits 1 on a timeout");
        assert_eq!(
            error_message(&timeout).as_deref(),
            Some("error: the state request failed: timed out after 5 ms waiting for the response from the server")
        );
        assert_eq!(exit_code(&anyhow::Error::new(ConnectionError::Closed)), EXIT_FAILURE);
        let interrupted = anyhow::Error::new(signals::Interrupted { number: 2 });
        assert_eq!((exit_code(&interrupted), error_message(&interrupted)), (130, None));
    }
}
