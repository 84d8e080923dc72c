//! Why a desired state is refused. The texts are the server's rejection
//! messages (`Update rejected: '<text>'`), so they stay as they are.

use ank_common::API_VERSION;
use ank_common::config_renderer::RenderError;

use super::MAX_DESIRED_STATE_BYTES;

/// A desired state the server cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidState {
    /// A name, a field, a group or an access rule does not validate.
    #[error("{0}")]
    Invalid(String),
    /// A config template does not render.
    #[error("{0}")]
    Render(#[from] RenderError),
    /// Dependencies, with the pipeline order of groups, form a cycle.
    #[error("dependency cycle (with the pipeline order of groups): {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// The state and its effective state would not fit in one message.
    #[error(
        "the desired state would take {size} bytes on the wire with its effective state, more than the {MAX_DESIRED_STATE_BYTES} bytes allowed (3/4 of the {} byte message limit)",
        ank_proto::MAX_MESSAGE_BYTES
    )]
    TooLarge { size: usize },
    /// An update of another apiVersion.
    #[error("unsupported apiVersion '{0}', expected '{API_VERSION}'")]
    ApiVersion(String),
    /// The merged state does not read as a desired state.
    #[error("invalid desired state: {0}")]
    Unreadable(String),
}
