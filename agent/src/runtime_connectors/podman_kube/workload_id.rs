//! The podman-kube workload id: everything needed to watch and to tear down
//! a played manifest, serialized as JSON into the opaque `WorkloadId`.

use ank_common::WorkloadInstanceName;
use serde::{Deserialize, Serialize};

use crate::runtime_connectors::{RuntimeError, WorkloadId};

/// What identifies a played manifest.
// [impl->swdd~podman-kube-workload-id]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeWorkloadId {
    /// The workload instance name, as a string.
    pub instance_name: String,
    /// Ids of the pods `podman kube play` created.
    pub pods: Vec<String>,
    /// The manifest, needed again by `podman kube down`.
    pub manifest: String,
    pub down_options: Vec<String>,
    pub general_options: Vec<String>,
}

impl KubeWorkloadId {
    pub fn to_workload_id(&self) -> WorkloadId {
        // Serializing plain strings cannot fail.
        WorkloadId(serde_json::to_string(self).unwrap_or_default())
    }

    pub fn parse(id: &WorkloadId) -> Result<Self, RuntimeError> {
        serde_json::from_str(&id.0)
            .map_err(|e| RuntimeError::InvalidConfig(format!("not a podman-kube workload id: {e}")))
    }

    /// The instance name, if it parses.
    pub fn instance(&self) -> Option<WorkloadInstanceName> {
        WorkloadInstanceName::parse(&self.instance_name).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_kube_workload_id_round_trips_through_the_opaque_id() {
        let id = KubeWorkloadId {
            instance_name: "k.abc.agent_A".into(),
            pods: vec!["p1".into(), "p2".into()],
            manifest: "kind: Pod\n".into(),
            down_options: vec!["--force".into()],
            general_options: vec![],
        };
        assert_eq!(KubeWorkloadId::parse(&id.to_workload_id()).unwrap(), id);
        assert!(KubeWorkloadId::parse(&WorkloadId("0123abc".into())).is_err());
        assert_eq!(id.instance().unwrap().workload_name, "k");
    }
}
