//! The error lines of the commands that change the state, worded as
//! Ankaios' `ank` words them: `apply` prints `Command failed: '<why>'`,
//! `delete workload`, `run workload` and `set state` put their own prefix
//! before that (`Failed to run workloads: 'Command failed: '<why>''`). A
//! server's rejection reads `SetState failed with: '<message>'` and a
//! missing answer `Command timed out after '<duration>'`, as there. Errors
//! of the connection itself keep their own text, as in Ankaios; a state
//! file that makes no state reads `Could not serialize YAML object: '<why>'`.

use crate::connection::ConnectionError;

/// The server refused an update.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server rejected the request: {0}")]
pub struct UpdateRejected(pub String);

/// A state file that does not make a state where Ankaios' `ank` reads it
/// as one (e.g. a `desiredState` without `apiVersion`); worded as there,
/// without `Command failed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Could not serialize YAML object: '{0}'")]
pub struct YamlObjectInvalid(pub String);

/// A failed state-changing command, with Ankaios' wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct CommandFailed {
    text: String,
}

/// The command whose failure is worded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteCommand {
    Apply,
    DeleteWorkloads,
    RunWorkload,
    SetState,
}

impl WriteCommand {
    fn prefix(self) -> Option<&'static str> {
        match self {
            Self::Apply => None,
            Self::DeleteWorkloads => Some("Failed to delete workloads"),
            Self::RunWorkload => Some("Failed to run workloads"),
            Self::SetState => Some("Failed to set state"),
        }
    }
}

/// `err` of `command` in Ankaios' words; errors that reaching the server
/// and signals cause are returned unchanged.
pub fn reword(command: WriteCommand, err: anyhow::Error) -> anyhow::Error {
    let failed = match err.chain().find_map(|cause| cause.downcast_ref::<YamlObjectInvalid>()) {
        Some(invalid) => invalid.to_string(),
        None => match reason(&err) {
            Some(why) => format!("Command failed: '{why}'"),
            None => return err,
        },
    };
    let text = match command.prefix() {
        Some(prefix) => format!("{prefix}: '{failed}'"),
        None => failed,
    };
    CommandFailed { text }.into()
}

/// The `<why>` of `err`, `None` for errors that keep their text.
fn reason(err: &anyhow::Error) -> Option<String> {
    for cause in err.chain() {
        if cause.downcast_ref::<crate::signals::Interrupted>().is_some()
            || cause.downcast_ref::<crate::cli::SettingsError>().is_some()
        {
            return None;
        }
        if let Some(UpdateRejected(message)) = cause.downcast_ref() {
            return Some(format!("SetState failed with: '{message}'"));
        }
        match cause.downcast_ref::<ConnectionError>() {
            Some(ConnectionError::Timeout { after, .. }) => {
                return Some(format!("Command timed out after '{after:?}'"));
            }
            Some(ConnectionError::Closed | ConnectionError::Stream(_)) => {
                return Some("Connection to server interrupted".to_owned());
            }
            Some(
                ConnectionError::InvalidUrl { .. } | ConnectionError::Connect { .. } | ConnectionError::Refused { .. },
            ) => {
                return None;
            }
            _ => {}
        }
    }
    Some(match err.downcast_ref::<ank_common::manifest::ManifestError>() {
        Some(manifest) => manifest.to_string(),
        None => format!("{err:#}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn reword_uses_ankaios_prefixes_and_quotes() {
        let rejected = anyhow::Error::new(UpdateRejected("cycle".into())).context("the update request failed");
        assert_eq!(
            reword(WriteCommand::RunWorkload, rejected).to_string(),
            "Failed to run workloads: 'Command failed: 'SetState failed with: 'cycle'''"
        );
        let timeout =
            anyhow::Error::new(ConnectionError::Timeout { what: "the response", after: Duration::from_secs(3) });
        assert_eq!(reword(WriteCommand::Apply, timeout).to_string(), "Command failed: 'Command timed out after '3s''");
        let other = anyhow::anyhow!("No agent name specified -> use '--agent' option to specify!");
        assert_eq!(
            reword(WriteCommand::Apply, other).to_string(),
            "Command failed: 'No agent name specified -> use '--agent' option to specify!'"
        );
        let closed = anyhow::Error::new(ConnectionError::Closed);
        assert_eq!(
            reword(WriteCommand::DeleteWorkloads, closed).to_string(),
            "Failed to delete workloads: 'Command failed: 'Connection to server interrupted''"
        );
        let signal = anyhow::Error::new(crate::signals::Interrupted { number: 15 });
        assert!(reword(WriteCommand::SetState, signal).downcast_ref::<crate::signals::Interrupted>().is_some());
    }
}
