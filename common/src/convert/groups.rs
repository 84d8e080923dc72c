//! Wire <-> model of the workload groups of a desired state (`State`
//! field 100, an extension).

use ank_proto::ank_base as pb;

use super::ConvertError;
use super::workload_policy::{policy_from_pb, policy_to_pb, selector_from_pb, selector_to_pb};
use crate::groups::{Group, GroupMode, Groups};
use crate::names::WorkloadName;

pub(crate) fn groups_from_pb(g: pb::GroupMap) -> Result<Groups, ConvertError> {
    g.groups.into_iter().map(|(name, group)| Ok((name.clone(), group_from_pb(&name, group)?))).collect()
}

pub(crate) fn groups_to_pb(g: Groups) -> pb::GroupMap {
    pb::GroupMap { groups: g.into_iter().map(|(name, group)| (name, group_to_pb(group))).collect() }
}

fn group_from_pb(name: &str, g: pb::Group) -> Result<Group, ConvertError> {
    let mode = match pb::GroupMode::try_from(g.mode) {
        Ok(pb::GroupMode::Batch) => GroupMode::Batch,
        Ok(pb::GroupMode::Pipeline) => GroupMode::Pipeline,
        Err(_) => return Err(ConvertError(format!("group '{name}': unknown mode {}", g.mode))),
    };
    let members = g
        .members
        .into_iter()
        .map(|m| WorkloadName::new(m).map_err(|e| ConvertError(format!("group '{name}': {e}"))))
        .collect::<Result<_, _>>()?;
    Ok(Group {
        mode,
        members,
        priority: g.priority,
        policy: g.policy.map(policy_from_pb).unwrap_or_default(),
        agent: g.agent.unwrap_or_default(),
        agent_selector: g.agent_selector.map(selector_from_pb),
        tags: g.tags.map(|t| t.tags.into_iter().collect()).unwrap_or_default(),
    })
}

fn group_to_pb(g: Group) -> pb::Group {
    let mode = match g.mode {
        GroupMode::Batch => pb::GroupMode::Batch,
        GroupMode::Pipeline => pb::GroupMode::Pipeline,
    };
    pb::Group {
        mode: mode as i32,
        members: g.members.into_iter().map(|m| m.to_string()).collect(),
        priority: g.priority,
        policy: (!g.policy.is_default()).then(|| policy_to_pb(g.policy)),
        agent: (!g.agent.is_empty()).then_some(g.agent),
        agent_selector: g.agent_selector.map(selector_to_pb),
        tags: (!g.tags.is_empty()).then(|| pb::Tags { tags: g.tags.into_iter().collect() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_wire_round_trip_and_bad_values_are_errors() {
        let text = "apiVersion: v1\nworkloads:\n  a: {runtime: podman, runtimeConfig: x}\n  b: {runtime: podman, runtimeConfig: y}\ngroups:\n  p:\n    mode: pipeline\n    members: [b, a]\n  q:\n    members: [c]\n    priority: 3\n    agent: agent_A\n    tags: {k: v}\n    policy: {isolated: true}\n";
        let state = crate::manifest::parse_manifest("m", text).unwrap();
        assert_eq!(groups_from_pb(groups_to_pb(state.groups.clone())).unwrap(), state.groups);
        let bad = pb::GroupMap { groups: [("g".to_owned(), pb::Group { mode: 9, ..Default::default() })].into() };
        assert_eq!(groups_from_pb(bad).unwrap_err().to_string(), "invalid message: group 'g': unknown mode 9");
        let bad = pb::GroupMap {
            groups: [("g".to_owned(), pb::Group { members: vec!["a.b".into()], ..Default::default() })].into(),
        };
        assert!(groups_from_pb(bad).unwrap_err().to_string().contains("group 'g': workload name 'a.b'"));
    }
}
