//! Validated names: workload names (`[A-Za-z0-9_-]{1,63}`) and agent names
//! (`[A-Za-z0-9_-]{0,63}`, empty meaning "not scheduled"). Values of these
//! types are valid by construction; deserializing one validates it, so a
//! manifest error carries the YAML position of the offending name.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest allowed workload or agent name.
pub const MAX_NAME_LEN: usize = 63;

/// Why a name was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{kind} name '{name}' is invalid: only [A-Za-z0-9_-] are allowed")]
    BadCharacter { kind: &'static str, name: String },
    #[error("{kind} name '{name}' is {len} characters long; the maximum is {MAX_NAME_LEN}")]
    TooLong { kind: &'static str, name: String, len: usize },
    #[error("{kind} name must not be empty")]
    Empty { kind: &'static str },
}

fn check(kind: &'static str, name: &str, allow_empty: bool) -> Result<(), NameError> {
    if name.is_empty() && !allow_empty {
        return Err(NameError::Empty { kind });
    }
    if name.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong { kind, name: name.to_owned(), len: name.len() });
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(NameError::BadCharacter { kind, name: name.to_owned() });
    }
    Ok(())
}

macro_rules! validated_name {
    ($(#[$doc:meta])* $ty:ident, $kind:literal, $allow_empty:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $ty(String);

        impl $ty {
            /// Validates `name`.
            pub fn new(name: impl Into<String>) -> Result<Self, NameError> {
                let name = name.into();
                check($kind, &name, $allow_empty)?;
                Ok(Self(name))
            }

            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $ty {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $ty {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                Self::new(s)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }

        #[cfg(feature = "schema")]
        impl schemars::JsonSchema for $ty {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed("string")
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

validated_name!(
    /// A workload name: `[A-Za-z0-9_-]{1,63}`.
    WorkloadName,
    "workload",
    false
);
validated_name!(
    /// An agent name: `[A-Za-z0-9_-]{0,63}`; empty means "not scheduled".
    AgentName,
    "agent",
    true
);

impl AgentName {
    /// The empty name of a workload that is not scheduled on any agent.
    pub fn unscheduled() -> Self {
        Self(String::new())
    }

    /// Whether this is the empty name of an unscheduled workload.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Validates a name of a node that runs an agent; unlike a workload's `agent`
/// field it must not be empty.
pub fn validate_agent_node_name(name: &str) -> Result<AgentName, NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { kind: "agent" });
    }
    AgentName::new(name)
}

/// Validates a config key, a config alias or an alias' target key:
/// `[A-Za-z0-9_-]{1,63}`. `kind` names it in the error ("config key", ...).
pub fn validate_config_name(kind: &'static str, name: &str) -> Result<(), NameError> {
    check(kind, name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_accept_valid_characters() {
        assert!(WorkloadName::new("nginx_1-a").is_ok());
        assert!(AgentName::new("").is_ok());
        assert!(AgentName::new("agent_A").is_ok());
    }

    #[test]
    fn names_reject_dots_spaces_and_length() {
        assert_eq!(
            WorkloadName::new("a.b").unwrap_err().to_string(),
            "workload name 'a.b' is invalid: only [A-Za-z0-9_-] are allowed"
        );
        assert!(matches!(WorkloadName::new(""), Err(NameError::Empty { .. })));
        assert!(matches!(WorkloadName::new("x".repeat(64)), Err(NameError::TooLong { len: 64, .. })));
        assert!(WorkloadName::new("x".repeat(63)).is_ok());
        assert!(validate_agent_node_name("").is_err());
        assert!(AgentName::new("a b").is_err());
        assert!(validate_config_name("config key", "db-conf_1").is_ok());
        assert_eq!(
            validate_config_name("config key", "a.b").unwrap_err().to_string(),
            "config key name 'a.b' is invalid: only [A-Za-z0-9_-] are allowed"
        );
        assert!(validate_config_name("config alias", "").is_err());
    }
}
