//! The agent's containers as containerd lists them: `Containers.List` with
//! the `agent` label filter joined with the namespace's tasks, each with the
//! instance named by its `name` label and the state of its task.

use std::collections::HashMap;

use ank_common::WorkloadInstanceName;

use super::client::{CallError, Containerd};
use super::states::state_of;
use crate::runtime_connectors::{ListedWorkload, WorkloadId};

/// containerd's filter for the containers labelled with `key=value`.
pub fn label_filter(key: &str, value: &str) -> String {
    format!("labels.\"{key}\"==\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The instance a container with `labels` runs, if it is one of `agent`'s.
pub fn instance_of(labels: &HashMap<String, String>, agent: &str) -> Option<WorkloadInstanceName> {
    if labels.get("agent").map(String::as_str) != Some(agent) {
        return None;
    }
    WorkloadInstanceName::parse(labels.get("name")?).ok()
}

/// All containers of `agent` with their instance names and states.
// [impl->swdd~agent-existing-workloads-finds-list~1]
pub async fn list(cd: &Containerd, agent: &str) -> Result<Vec<ListedWorkload>, CallError> {
    let containers = cd.containers(&label_filter("agent", agent)).await?;
    if containers.is_empty() {
        return Ok(Vec::new());
    }
    let tasks: HashMap<String, _> = cd.tasks().await?.into_iter().map(|t| (t.id.clone(), t)).collect();
    Ok(containers
        .into_iter()
        .filter_map(|c| {
            let instance_name = instance_of(&c.labels, agent)?;
            let state = state_of(tasks.get(&c.id));
            Some(ListedWorkload { instance_name, workload_id: WorkloadId(c.id), state })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filters_quote_their_value() {
        assert_eq!(label_filter("agent", "a"), "labels.\"agent\"==\"a\"");
        assert_eq!(label_filter("name", "x\"y"), "labels.\"name\"==\"x\\\"y\"");
    }

    #[test]
    fn only_this_agents_containers_with_a_valid_name_are_instances() {
        let labels = |agent: &str, name: &str| {
            HashMap::from([("agent".to_owned(), agent.to_owned()), ("name".to_owned(), name.to_owned())])
        };
        let name = "web.1234567890abcdef.a";
        assert_eq!(instance_of(&labels("a", name), "a").map(|n| n.to_string()), Some(name.to_owned()));
        assert_eq!(instance_of(&labels("b", name), "a"), None);
        assert_eq!(instance_of(&labels("a", "not a name"), "a"), None);
        assert_eq!(instance_of(&HashMap::new(), "a"), None);
    }
}
