//! Workload instance names `<workload>.<id>.<agent>`, where `id` is the
//! lowercase hex SHA-256 of the rendered runtimeConfig, and the short
//! container name `<workload>.<first 7 hex>.<agent>` podman gets by default.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::names::{AgentName, NameError, WorkloadName};

/// Identifies one concrete instance of a workload on one agent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadInstanceName {
    pub workload_name: String,
    pub agent_name: String,
    pub id: String,
}

/// Why a string is not an instance name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstanceNameError {
    #[error("'{0}' is not an instance name of the form <workload>.<id>.<agent>")]
    Shape(String),
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("instance id '{0}' is invalid: it may only contain [A-Za-z0-9_-] (paths are built from it)")]
    Id(String),
}

/// Checks an instance id before the agent builds paths from it (the
/// instance's folder `<workload>.<id>`): ids are hex digests, so letters,
/// digits, `_` and `-` only; no `.`, `/` or other character. Empty is
/// accepted (requests name workloads without an id).
pub fn check_id(id: &str) -> Result<(), InstanceNameError> {
    if id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        Ok(())
    } else {
        Err(InstanceNameError::Id(id.to_owned()))
    }
}

/// Lowercase hex SHA-256 of a rendered runtime config.
pub fn runtime_config_id(runtime_config: &str) -> String {
    let digest = Sha256::digest(runtime_config.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    hex
}

impl WorkloadInstanceName {
    /// The instance name of `workload` on `agent` with this rendered config.
    pub fn new(workload: &WorkloadName, agent: &AgentName, runtime_config: &str) -> Self {
        Self {
            workload_name: workload.to_string(),
            agent_name: agent.to_string(),
            id: runtime_config_id(runtime_config),
        }
    }

    /// Parses `<workload>.<id>.<agent>` and validates both names.
    pub fn parse(s: &str) -> Result<Self, InstanceNameError> {
        let mut parts = s.split('.');
        let (Some(w), Some(id), Some(a), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(InstanceNameError::Shape(s.to_owned()));
        };
        WorkloadName::new(w)?;
        AgentName::new(a)?;
        if id.is_empty() {
            return Err(InstanceNameError::Shape(s.to_owned()));
        }
        check_id(id)?;
        Ok(Self { workload_name: w.to_owned(), agent_name: a.to_owned(), id: id.to_owned() })
    }

    /// The instance's folder in the agent's `<agent>_io` folder,
    /// `<workload>.<id>` as Ankaios names it: its `files` and its
    /// `control_interface` live there.
    pub fn folder_name(&self) -> String {
        format!("{}.{}", self.workload_name, self.id)
    }

    /// The default podman container name: `<workload>.<first 7 hex>.<agent>`.
    pub fn short_name(&self) -> String {
        let short: String = self.id.chars().take(7).collect();
        format!("{}.{}.{}", self.workload_name, short, self.agent_name)
    }
}

impl fmt::Display for WorkloadInstanceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.workload_name, self.id, self.agent_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_that_would_leave_the_instance_folder_are_refused() {
        for bad in ["../../etc", "a/b", "..", "x y", "a\\b"] {
            assert_eq!(check_id(bad), Err(InstanceNameError::Id(bad.to_owned())), "{bad}");
        }
        assert_eq!(check_id(&runtime_config_id("x")), Ok(()));
        assert_eq!(check_id(""), Ok(()));
        assert!(matches!(WorkloadInstanceName::parse("w.a/b.agent_A"), Err(InstanceNameError::Id(_))));
        let e = crate::convert::instance_name_from_proto(Some(ank_proto::ank_base::WorkloadInstanceName {
            workload_name: "w".into(),
            agent_name: "A".into(),
            id: "../../../tmp/x".into(),
        }))
        .unwrap_err();
        assert!(e.to_string().contains("instance id '../../../tmp/x' is invalid"), "{e}");
    }

    #[test]
    fn instance_name_id_is_sha256_of_runtime_config() {
        // sha256("image: busybox\n") computed independently with sha256sum.
        let wl = WorkloadName::new("nginx").unwrap();
        let ag = AgentName::new("agent_A").unwrap();
        let n = WorkloadInstanceName::new(&wl, &ag, "");
        assert_eq!(n.id, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        let n = WorkloadInstanceName::new(&wl, &ag, "abc");
        assert_eq!(n.id, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(n.to_string(), format!("nginx.{}.agent_A", n.id));
        assert_eq!(n.short_name(), "nginx.ba7816b.agent_A");
    }

    #[test]
    fn instance_name_parse_round_trips_and_rejects_garbage() {
        let n = WorkloadInstanceName::parse("w.abc.agent").unwrap();
        assert_eq!(n.to_string(), "w.abc.agent");
        assert!(WorkloadInstanceName::parse("w.abc").is_err());
        assert!(WorkloadInstanceName::parse("w.a.b.c").is_err());
        assert!(WorkloadInstanceName::parse("w..a").is_err());
    }
}
