//! The wire form of a (possibly partial) workload: [`PartialWorkload`] to
//! and from `pb::Workload` (checked: unknown enum values are refused), and
//! the partial form of a typed [`crate::Workload`] and back
//! ([`PartialWorkload::to_workload`], by the rules of a manifest).

use ank_proto::ank_base as pb;

use super::ConvertError;
use super::health::{backoff_from_pb, backoff_to_pb, gate_from_pb, gate_to_pb, probe_from_pb, probe_to_pb};
use super::partial::{PartialWorkload, tags_to_pb};
use super::workload_policy::{
    migration_from_pb, migration_to_pb, policy_from_pb, policy_to_pb, selector_from_pb, selector_to_pb,
};
use crate::workload::{AccessRule, AddCondition, ControlInterfaceAccess, File, FileContent, ReadWrite, RestartPolicy};

impl From<&crate::Workload> for PartialWorkload {
    fn from(w: &crate::Workload) -> Self {
        PartialWorkload {
            agent: Some(w.agent.clone()),
            restart_policy: Some(w.restart_policy),
            dependencies: Some(w.dependencies.iter().map(|(k, v)| (k.to_string(), *v)).collect()),
            tags: Some(w.tags.clone()),
            runtime: Some(w.runtime.clone()),
            runtime_config: Some(w.runtime_config.clone()),
            control_interface_access: Some(w.control_interface_access.clone()),
            configs: Some(w.configs.clone()),
            files: (!w.files.is_empty()).then(|| w.files.clone()),
            priority: w.priority,
            effective_priority: w.effective_priority,
            policy: (!w.policy.is_default()).then_some(w.policy),
            agent_selector: w.agent_selector.clone(),
            migration: (!w.migration.is_default()).then_some(w.migration),
            ttl_after_finished: w.ttl_after_finished.clone(),
            startup_probe: w.startup_probe.clone(),
            liveness_probe: w.liveness_probe.clone(),
            readiness_probe: w.readiness_probe.clone(),
            restart_backoff: w.restart_backoff.clone(),
            update: w.update.clone(),
        }
    }
}

impl PartialWorkload {
    /// The workload, read by the same rules as its JSON form is read into a
    /// [`crate::Workload`] (a manifest's): absent fields take their
    /// defaults, `agent` (unless a template), dependency names and
    /// `runtime`/`runtimeConfig` (both required) are checked, the runtime
    /// config trimmed. `None` where that reading fails.
    pub fn to_workload(&self) -> Option<crate::Workload> {
        if let Some(agent) = &self.agent
            && !agent.contains("{{")
        {
            crate::AgentName::new(agent.as_str()).ok()?;
        }
        let dependencies = match &self.dependencies {
            None => Default::default(),
            Some(d) => {
                d.iter().map(|(k, c)| Some((crate::WorkloadName::new(k.as_str()).ok()?, *c))).collect::<Option<_>>()?
            }
        };
        let runtime_config = self.runtime_config.as_deref()?;
        Some(crate::Workload {
            agent: self.agent.clone().unwrap_or_default(),
            restart_policy: self.restart_policy.unwrap_or_default(),
            dependencies,
            tags: self.tags.clone().unwrap_or_default(),
            runtime: self.runtime.clone()?,
            runtime_config: runtime_config.trim().to_owned(),
            control_interface_access: self.control_interface_access.clone().unwrap_or_default(),
            configs: self.configs.clone().unwrap_or_default(),
            files: self.files.clone().unwrap_or_default(),
            priority: self.priority,
            effective_priority: self.effective_priority,
            policy: self.policy.unwrap_or_default(),
            agent_selector: self.agent_selector.clone(),
            migration: self.migration.unwrap_or_default(),
            ttl_after_finished: self.ttl_after_finished.clone(),
            startup_probe: self.startup_probe.clone(),
            liveness_probe: self.liveness_probe.clone(),
            readiness_probe: self.readiness_probe.clone(),
            restart_backoff: self.restart_backoff.clone(),
            update: self.update.clone(),
        })
    }
}

pub(crate) fn workload_from_pb(w: pb::Workload) -> Result<PartialWorkload, ConvertError> {
    let restart_policy = w
        .restart_policy
        .map(|r| match pb::RestartPolicy::try_from(r) {
            Ok(pb::RestartPolicy::Never) => Ok(RestartPolicy::Never),
            Ok(pb::RestartPolicy::OnFailure) => Ok(RestartPolicy::OnFailure),
            Ok(pb::RestartPolicy::Always) => Ok(RestartPolicy::Always),
            Err(_) => Err(ConvertError(format!("unknown restartPolicy {r}"))),
        })
        .transpose()?;
    let dependencies = w
        .dependencies
        .map(|d| {
            d.dependencies
                .into_iter()
                .map(|(k, v)| {
                    let c = match pb::AddCondition::try_from(v) {
                        Ok(pb::AddCondition::AddCondRunning) => AddCondition::Running,
                        Ok(pb::AddCondition::AddCondSucceeded) => AddCondition::Succeeded,
                        Ok(pb::AddCondition::AddCondFailed) => AddCondition::Failed,
                        Err(_) => return Err(ConvertError(format!("unknown add condition {v} for '{k}'"))),
                    };
                    Ok((k, c))
                })
                .collect::<Result<_, _>>()
        })
        .transpose()?;
    Ok(PartialWorkload {
        agent: w.agent,
        restart_policy,
        dependencies,
        tags: w.tags.map(|t| t.tags.into_iter().collect()),
        runtime: w.runtime,
        runtime_config: w.runtime_config,
        control_interface_access: w.control_interface_access.map(access_from_pb).transpose()?,
        configs: w.configs.map(|c| c.configs.into_iter().collect()),
        files: w.files.map(|f| f.files.into_iter().map(file_from_pb).collect::<Result<_, _>>()).transpose()?,
        priority: w.priority,
        effective_priority: w.effective_priority,
        policy: w.policy.map(policy_from_pb),
        agent_selector: w.agent_selector.map(selector_from_pb),
        migration: w.migration.map(migration_from_pb).transpose()?,
        ttl_after_finished: w.ttl_after_finished,
        startup_probe: w.startup_probe.map(probe_from_pb).transpose()?,
        liveness_probe: w.liveness_probe.map(probe_from_pb).transpose()?,
        readiness_probe: w.readiness_probe.map(probe_from_pb).transpose()?,
        restart_backoff: w.restart_backoff.map(backoff_from_pb),
        update: w.update.map(gate_from_pb),
    })
}

pub(crate) fn workload_to_pb(w: PartialWorkload) -> pb::Workload {
    pb::Workload {
        agent: w.agent,
        restart_policy: w.restart_policy.map(|r| match r {
            RestartPolicy::Never => pb::RestartPolicy::Never as i32,
            RestartPolicy::OnFailure => pb::RestartPolicy::OnFailure as i32,
            RestartPolicy::Always => pb::RestartPolicy::Always as i32,
        }),
        dependencies: w.dependencies.map(|d| pb::Dependencies {
            dependencies: d
                .into_iter()
                .map(|(k, c)| {
                    let v = match c {
                        AddCondition::Running => pb::AddCondition::AddCondRunning,
                        AddCondition::Succeeded => pb::AddCondition::AddCondSucceeded,
                        AddCondition::Failed => pb::AddCondition::AddCondFailed,
                    };
                    (k, v as i32)
                })
                .collect(),
        }),
        tags: w.tags.map(tags_to_pb),
        runtime: w.runtime,
        runtime_config: w.runtime_config,
        control_interface_access: w.control_interface_access.map(access_to_pb),
        configs: w.configs.map(|c| pb::ConfigMappings { configs: c.into_iter().collect() }),
        files: w.files.map(|f| pb::Files { files: f.into_iter().map(file_to_pb).collect() }),
        priority: w.priority,
        effective_priority: w.effective_priority,
        // Default values stay off the wire, as Ankaios peers expect.
        policy: w.policy.filter(|p| !p.is_default()).map(policy_to_pb),
        agent_selector: w.agent_selector.map(selector_to_pb),
        migration: w.migration.filter(|m| !m.is_default()).map(migration_to_pb),
        ttl_after_finished: w.ttl_after_finished,
        startup_probe: w.startup_probe.map(probe_to_pb),
        liveness_probe: w.liveness_probe.map(probe_to_pb),
        readiness_probe: w.readiness_probe.map(probe_to_pb),
        restart_backoff: w.restart_backoff.map(backoff_to_pb),
        update: w.update.map(gate_to_pb),
    }
}

fn file_from_pb(f: pb::File) -> Result<File, ConvertError> {
    use pb::file::FileContent as F;
    let content = match f.file_content.ok_or_else(|| ConvertError::missing("files[].data"))? {
        F::Data(d) => FileContent::Data(d),
        F::BinaryData(d) => FileContent::BinaryData(d),
    };
    Ok(File { mount_point: f.mount_point, content })
}

fn file_to_pb(f: File) -> pb::File {
    use pb::file::FileContent as F;
    let content = match f.content {
        FileContent::Data(d) => F::Data(d),
        FileContent::BinaryData(d) => F::BinaryData(d),
    };
    pb::File { mount_point: f.mount_point, file_content: Some(content) }
}

fn access_from_pb(a: pb::ControlInterfaceAccess) -> Result<ControlInterfaceAccess, ConvertError> {
    let rules = |v: Vec<pb::AccessRightsRule>| v.into_iter().map(rule_from_pb).collect::<Result<Vec<_>, _>>();
    Ok(ControlInterfaceAccess { allow_rules: rules(a.allow_rules)?, deny_rules: rules(a.deny_rules)? })
}

fn access_to_pb(a: ControlInterfaceAccess) -> pb::ControlInterfaceAccess {
    pb::ControlInterfaceAccess {
        allow_rules: a.allow_rules.into_iter().map(rule_to_pb).collect(),
        deny_rules: a.deny_rules.into_iter().map(rule_to_pb).collect(),
    }
}

fn rule_from_pb(r: pb::AccessRightsRule) -> Result<AccessRule, ConvertError> {
    use pb::access_rights_rule::AccessRightsRuleEnum as R;
    match r.access_rights_rule_enum.ok_or_else(|| ConvertError::missing("accessRightsRule"))? {
        R::StateRule(s) => {
            let operation = match pb::ReadWriteEnum::try_from(s.operation) {
                Ok(pb::ReadWriteEnum::RwNothing) => ReadWrite::Nothing,
                Ok(pb::ReadWriteEnum::RwRead) => ReadWrite::Read,
                Ok(pb::ReadWriteEnum::RwWrite) => ReadWrite::Write,
                Ok(pb::ReadWriteEnum::RwReadWrite) => ReadWrite::ReadWrite,
                Err(_) => return Err(ConvertError(format!("unknown state rule operation {}", s.operation))),
            };
            Ok(AccessRule::StateRule { operation, filter_masks: s.filter_masks })
        }
        R::LogRule(l) => Ok(AccessRule::LogRule { workload_names: l.workload_names }),
    }
}

fn rule_to_pb(r: AccessRule) -> pb::AccessRightsRule {
    use pb::access_rights_rule::AccessRightsRuleEnum as R;
    let e = match r {
        AccessRule::StateRule { operation, filter_masks } => {
            let op = match operation {
                ReadWrite::Nothing => pb::ReadWriteEnum::RwNothing,
                ReadWrite::Read => pb::ReadWriteEnum::RwRead,
                ReadWrite::Write => pb::ReadWriteEnum::RwWrite,
                ReadWrite::ReadWrite => pb::ReadWriteEnum::RwReadWrite,
            };
            R::StateRule(pb::StateRule { operation: op as i32, filter_masks })
        }
        AccessRule::LogRule { workload_names } => R::LogRule(pb::LogRule { workload_names }),
    };
    pb::AccessRightsRule { access_rights_rule_enum: Some(e) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;
    use crate::complete_state::ConfigItem;
    use crate::convert::PartialState;

    fn by_json(w: &PartialWorkload) -> Option<crate::Workload> {
        serde_json::to_value(w).and_then(crate::Workload::deserialize).ok()
    }

    #[test]
    fn a_workload_becomes_the_partial_workload_its_json_tree_reads_as() {
        let yaml = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    tags: {k: v}\n    \
                    dependencies: {b: ADD_COND_RUNNING}\n    runtimeConfig: x\n    configs: {c: c1}\n    priority: 3\n    \
                    files: [{mountPoint: /f, data: d}, {mountPoint: /g, binaryData: Zm9v}]\n    ttlAfterFinished: 10s\n    \
                    restartPolicy: ALWAYS\n    policy: {preemptEnabled: true}\n    migration: rebalance\n    \
                    startupProbe: {exec: {command: [true]}}\n    livenessProbe: {tcpSocket: {port: 80}}\n    \
                    readinessProbe: {httpGet: {path: /, port: 8080}}\n    restartBackoff: {initialDelay: 1s}\n    \
                    update: {healthyDeadline: 5m}\n    controlInterfaceAccess: {allowRules: [{type: StateRule, \
                    operation: Read, filterMask: ['*']}], denyRules: [{type: LogRule, workloadNames: [b]}]}\n  \
                    b:\n    runtime: podman\n    runtimeConfig: y\n    agentSelector: {matchLabels: {zone: x}}\n  \
                    c:\n    runtime: podman-kube\n    agent: B\n    runtimeConfig: z\n";
        let state = crate::manifest::parse_manifest("t", yaml).unwrap();
        let mut workloads: Vec<crate::Workload> = state.workloads.values().cloned().collect();
        let mut effective = workloads[1].clone();
        effective.effective_priority = Some(7);
        workloads.push(effective);
        workloads.push(crate::Workload::default());
        for w in &workloads {
            let by_json: PartialWorkload = serde_json::to_value(w).and_then(serde_json::from_value).unwrap();
            assert_eq!(PartialWorkload::from(w), by_json, "{w:?}");
        }
    }

    #[test]
    fn a_partial_workload_reads_as_its_json_tree_does() {
        let yaml = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: A\n    tags: {k: v}\n    \
                    dependencies: {b: ADD_COND_RUNNING}\n    runtimeConfig: x\n    configs: {c: c1}\n    priority: 3\n    \
                    files: [{mountPoint: /f, data: d}]\n    ttlAfterFinished: 10s\n    restartPolicy: ALWAYS\n    \
                    policy: {preemptEnabled: true}\n    controlInterfaceAccess: {allowRules: [{type: StateRule, \
                    operation: Read, filterMask: ['*']}]}\n  b:\n    runtime: podman\n    runtimeConfig: y\n    \
                    agentSelector: {matchLabels: {zone: x}}\n";
        let state = crate::manifest::parse_manifest("t", yaml).unwrap();
        let whole = PartialState::from(&state);
        let mut cases: Vec<PartialWorkload> = whole.workloads.clone().unwrap().into_values().collect();
        cases.push(PartialWorkload::default());
        let base = cases[0].clone();
        cases.push(PartialWorkload { runtime: None, ..base.clone() });
        cases.push(PartialWorkload { runtime_config: None, ..base.clone() });
        cases.push(PartialWorkload { runtime_config: Some("  padded \n".into()), ..base.clone() });
        cases.push(PartialWorkload { agent: None, ..base.clone() });
        cases.push(PartialWorkload { agent: Some(String::new()), ..base.clone() });
        cases.push(PartialWorkload { agent: Some("bad agent!".into()), ..base.clone() });
        cases.push(PartialWorkload { agent: Some("{{x}}".into()), ..base.clone() });
        cases.push(PartialWorkload {
            dependencies: Some(BTreeMap::from([("bad name!".into(), AddCondition::Running)])),
            ..base.clone()
        });
        cases.push(PartialWorkload { files: Some(vec![]), tags: None, configs: None, dependencies: None, ..base });
        for w in &cases {
            assert_eq!(w.to_workload(), by_json(w), "{w:?}");
        }
        assert_eq!(whole.to_state(), serde_json::to_value(&whole).and_then(crate::State::deserialize).ok());
        let mut odd = whole.clone();
        odd.workloads.as_mut().unwrap().insert("bad name!".into(), cases[0].clone());
        odd.configs = Some(BTreeMap::from([("c".into(), ConfigItem::String("v".into()))]));
        assert_eq!(odd.to_state(), serde_json::to_value(&odd).and_then(crate::State::deserialize).ok());
        let empty = PartialState::default();
        assert_eq!(empty.to_state(), serde_json::to_value(&empty).and_then(crate::State::deserialize).ok());
    }
}
