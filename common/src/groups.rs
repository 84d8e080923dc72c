//! Workload groups (the tackle2-hub task groups): the top-level `groups:`
//! of a desired state, keyed by group name. A *batch* group gives its
//! members defaults (`priority`, `policy`, `agent` / `agentSelector`,
//! `tags`; a member's own value wins, tags are merged with the member's
//! winning). A *pipeline* group runs its members one after the other in
//! list order: each member gets an `ADD_COND_SUCCEEDED` dependency on the
//! previous one when the state is rendered (never in the state users
//! wrote), and the server cancels the members not started yet once one
//! fails. This module owns the model, its validation and the rendering of
//! the defaults and the pipeline order; the cancelling is the server's.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::names::WorkloadName;
use crate::workload::{AddCondition, Workload};
use crate::workload_policy::{AgentSelector, WorkloadPolicy};

/// How a group treats its members.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum GroupMode {
    /// Members run independently; the group only gives defaults.
    #[default]
    Batch,
    /// Members run strictly in list order; a failure cancels the rest.
    Pipeline,
}

impl GroupMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Batch => "batch",
            Self::Pipeline => "pipeline",
        }
    }
}

/// One group of the desired state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Group {
    #[serde(default)]
    pub mode: GroupMode,
    /// Workload names; for a pipeline in the order they run.
    #[serde(default)]
    pub members: Vec<WorkloadName>,
    /// Default priority of the members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// Default policy of the members (a member that sets any switch keeps its own).
    #[serde(default, skip_serializing_if = "WorkloadPolicy::is_default")]
    pub policy: WorkloadPolicy,
    /// Default agent of the members that name neither an agent nor a selector.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent: String,
    /// Default selector of the members that name neither an agent nor a selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_selector: Option<AgentSelector>,
    /// Tags every member gets unless it has a tag of the same key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// Group name -> group. Deserializing names the group in a field error
/// ("group 'upd': unknown variant `serial`, ...").
pub type Groups = BTreeMap<String, Group>;

/// Deserializes `groups:` so that an error inside a group names it.
pub fn deserialize_groups<'de, D: Deserializer<'de>>(d: D) -> Result<Groups, D::Error> {
    struct GroupsVisitor;
    impl<'de> Visitor<'de> for GroupsVisitor {
        type Value = Groups;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of group names to groups")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Groups, A::Error> {
            let mut out = Groups::new();
            while let Some(name) = map.next_key::<String>()? {
                let group = map.next_value::<Group>().map_err(|e| de::Error::custom(format!("group '{name}': {e}")))?;
                if out.insert(name.clone(), group).is_some() {
                    return Err(de::Error::custom(format!("duplicate group '{name}'")));
                }
            }
            Ok(out)
        }
    }
    d.deserialize_map(GroupsVisitor)
}

/// Whether there are no groups (they stay off an Ankaios-shaped state).
pub fn is_empty(groups: &Groups) -> bool {
    groups.is_empty()
}

/// A group that cannot be used, naming the group.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GroupError {
    #[error("groups: {0}")]
    Name(crate::names::NameError),
    #[error("group '{0}': field 'members' must not be empty")]
    NoMembers(String),
    #[error("group '{group}': member '{member}' is listed twice")]
    ListedTwice { group: String, member: String },
    #[error(
        "workload '{member}' is a member of groups '{first}' and '{second}'; a workload belongs to one group at most"
    )]
    TwoGroups { member: String, first: String, second: String },
    #[error("group '{0}': fields 'agent' and 'agentSelector' are exclusive: set one of them")]
    AgentAndSelector(String),
    #[error("group '{group}': field 'agent': {error}")]
    Agent { group: String, error: crate::names::NameError },
    #[error("group '{group}': {error}")]
    Selector { group: String, error: crate::workload_policy::SelectorError },
    #[error(
        "group '{group}': member '{member}' would not be a workload of the desired state after this update: \
         update the group's members with it, or delete the group together with its members"
    )]
    MissingMember { group: String, member: String },
}

/// Checks the groups on their own: valid names, members listed once, each
/// workload in one group at most, exclusive `agent` / `agentSelector`.
/// Whether the members exist is [`validate_members`]' business (a manifest
/// may name workloads another manifest brings).
// [feature K6: groups validated at apply, errors name the group]
pub fn validate(groups: &Groups) -> Result<(), GroupError> {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, group) in groups {
        crate::names::validate_config_name("group", name).map_err(GroupError::Name)?;
        if group.members.is_empty() {
            return Err(GroupError::NoMembers(name.clone()));
        }
        let mut seen = BTreeSet::new();
        for member in &group.members {
            if !seen.insert(member.as_str()) {
                return Err(GroupError::ListedTwice { group: name.clone(), member: member.to_string() });
            }
            if let Some(first) = owner.insert(member.as_str(), name.as_str()) {
                return Err(GroupError::TwoGroups {
                    member: member.to_string(),
                    first: first.to_owned(),
                    second: name.clone(),
                });
            }
        }
        if !group.agent.is_empty() {
            if group.agent_selector.is_some() {
                return Err(GroupError::AgentAndSelector(name.clone()));
            }
            crate::names::AgentName::new(group.agent.as_str())
                .map_err(|error| GroupError::Agent { group: name.clone(), error })?;
        }
        if let Some(selector) = &group.agent_selector {
            selector.parse().map_err(|error| GroupError::Selector { group: name.clone(), error })?;
        }
    }
    Ok(())
}

/// Checks that every member of every group is one of `workloads`.
pub fn validate_members(groups: &Groups, workloads: &BTreeMap<WorkloadName, Workload>) -> Result<(), GroupError> {
    for (name, group) in groups {
        if let Some(missing) = group.members.iter().find(|m| !workloads.contains_key(*m)) {
            return Err(GroupError::MissingMember { group: name.clone(), member: missing.to_string() });
        }
    }
    Ok(())
}

/// The group `workload` belongs to, if any.
pub fn group_of<'a>(groups: &'a Groups, workload: &str) -> Option<(&'a str, &'a Group)> {
    groups.iter().find(|(_, g)| g.members.iter().any(|m| m.as_str() == workload)).map(|(n, g)| (n.as_str(), g))
}

/// Renders the groups into the `rendered` workloads: every member gets the
/// defaults it leaves unset, and every pipeline member after the first an
/// `ADD_COND_SUCCEEDED` dependency on the one before it (unless it names a
/// condition for that workload itself). Members missing from `rendered`
/// are skipped.
// [feature K6: batch defaults and pipeline order, added at render time]
pub fn render(groups: &Groups, rendered: &mut BTreeMap<WorkloadName, Workload>) {
    for group in groups.values() {
        let mut previous: Option<&WorkloadName> = None;
        for member in &group.members {
            let Some(wl) = rendered.get_mut(member) else { continue };
            if wl.priority.is_none() {
                wl.priority = group.priority;
            }
            if wl.policy.is_default() {
                wl.policy = group.policy;
            }
            if wl.agent.is_empty() && wl.agent_selector.is_none() {
                wl.agent.clone_from(&group.agent);
                wl.agent_selector.clone_from(&group.agent_selector);
            }
            for (key, value) in &group.tags {
                wl.tags.entry(key.clone()).or_insert_with(|| value.clone());
            }
            if group.mode == GroupMode::Pipeline
                && let Some(prev) = previous
            {
                wl.dependencies.entry(prev.clone()).or_insert(AddCondition::Succeeded);
            }
            previous = Some(member);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complete_state::State;
    use crate::manifest::parse_manifest;

    const BATCH: &str = "apiVersion: v1
workloads:
  m1:
    runtime: podman
    runtimeConfig: x
    tags:
      team: own
  m2:
    runtime: podman
    agent: agent_B
    priority: 2
    runtimeConfig: y
groups:
  nightly:
    mode: batch
    members: [m1, m2]
    priority: 7
    agent: agent_A
    policy:
      preemptExempt: true
    tags:
      team: ops
      kind: batch
";

    // [test of feature K6: batch defaults, the member's own value wins]
    #[test]
    fn groups_batch_defaults_fill_what_members_leave_unset() {
        let state = parse_manifest("m.yaml", BATCH).unwrap();
        assert_eq!(state.groups["nightly"].mode, GroupMode::Batch);
        let mut rendered = state.clone();
        render(&state.groups, &mut rendered.workloads);
        let (m1, m2) = (&rendered.workloads["m1"], &rendered.workloads["m2"]);
        assert_eq!((m1.priority, m2.priority), (Some(7), Some(2)));
        assert_eq!((m1.agent.as_str(), m2.agent.as_str()), ("agent_A", "agent_B"));
        assert!(m1.policy.preempt_exempt && m2.policy.preempt_exempt);
        assert_eq!(m1.tags["team"], "own", "the member's tag wins");
        assert_eq!((m1.tags["kind"].as_str(), m2.tags["team"].as_str()), ("batch", "ops"));
        assert!(state.workloads["m1"].agent.is_empty(), "the state as written keeps no defaults");
    }

    // [test of feature K6: pipeline order as ADD_COND_SUCCEEDED on the previous member]
    #[test]
    fn groups_pipeline_members_depend_on_the_previous_one() {
        let text = "apiVersion: v1\nworkloads:\n  s1: {runtime: podman, agent: A, runtimeConfig: a}\n  s2: {runtime: podman, agent: A, runtimeConfig: b}\n  s3: {runtime: podman, agent: A, runtimeConfig: c, dependencies: {s2: ADD_COND_FAILED}}\ngroups:\n  upd:\n    mode: pipeline\n    members: [s1, s2, s3]\n";
        let state = parse_manifest("m.yaml", text).unwrap();
        let mut rendered = state.clone();
        render(&state.groups, &mut rendered.workloads);
        assert!(rendered.workloads["s1"].dependencies.is_empty());
        assert_eq!(rendered.workloads["s2"].dependencies[&WorkloadName::new("s1").unwrap()], AddCondition::Succeeded);
        assert_eq!(
            rendered.workloads["s3"].dependencies[&WorkloadName::new("s2").unwrap()],
            AddCondition::Failed,
            "a condition the member names itself stays"
        );
        assert!(state.workloads["s2"].dependencies.is_empty(), "not written into the user's state");
    }

    // [test of feature K6: unknown member, member in two groups, bad mode name the group]
    #[test]
    fn groups_errors_name_the_group() {
        let two = format!("{BATCH}  other:\n    members: [m2]\n");
        let e = parse_manifest("m.yaml", &two).unwrap_err().to_string();
        assert!(e.contains("workload 'm2' is a member of groups 'nightly' and 'other'"), "{e}");
        let bad_mode = BATCH.replace("mode: batch", "mode: serial");
        let e = parse_manifest("m.yaml", &bad_mode).unwrap_err().to_string();
        assert!(e.contains("group 'nightly'") && e.contains("serial"), "{e}");
        let twice = BATCH.replace("[m1, m2]", "[m1, m1]");
        let e = parse_manifest("m.yaml", &twice).unwrap_err().to_string();
        assert!(e.contains("group 'nightly': member 'm1' is listed twice"), "{e}");
        let empty = BATCH.replace("[m1, m2]", "[]");
        let e = parse_manifest("m.yaml", &empty).unwrap_err().to_string();
        assert!(e.contains("group 'nightly': field 'members' must not be empty"), "{e}");
        let both = BATCH
            .replace("    agent: agent_A\n", "    agent: agent_A\n    agentSelector:\n      labels: [\"a = b\"]\n");
        let e = parse_manifest("m.yaml", &both).unwrap_err().to_string();
        assert!(e.contains("group 'nightly': fields 'agent' and 'agentSelector' are exclusive"), "{e}");
        let unknown = BATCH.replace("[m1, m2]", "[m1, m9]");
        let state = parse_manifest("m.yaml", &unknown).unwrap();
        let e = validate_members(&state.groups, &state.workloads).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "group 'nightly': member 'm9' would not be a workload of the desired state after this update"
            ),
            "{e}"
        );
        let bad_name = BATCH.replace("  nightly:", "  night.ly:");
        let e = parse_manifest("m.yaml", &bad_name).unwrap_err().to_string();
        assert!(e.contains("group name 'night.ly' is invalid"), "{e}");
    }

    #[test]
    fn groups_round_trip_through_json_and_stay_off_plain_states() {
        let state = parse_manifest("m.yaml", BATCH).unwrap();
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["groups"]["nightly"]["mode"], "batch");
        assert_eq!(serde_json::from_value::<State>(json).unwrap(), state);
        let plain = State { api_version: "v1".into(), ..Default::default() };
        assert!(serde_json::to_value(&plain).unwrap().get("groups").is_none());
        assert_eq!(group_of(&state.groups, "m2").map(|(n, _)| n), Some("nightly"));
        assert!(group_of(&state.groups, "zz").is_none());
    }
}
