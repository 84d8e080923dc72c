//! What a desired message becomes: one `UpdateStateRequest` that sets the
//! manifest's workloads, configs and groups, removes those the previous
//! rollout set and this one no longer names, and records the rollout in
//! the config item [`LEDGER_CONFIG`] — all under one update mask, so the
//! vehicle's server takes the manifest and the record together or not at
//! all.
//!
//! The ledger lives in the vehicle's desired state, not in the connector:
//! it is persisted where the manifest is (the server's state file), read
//! back after a connector or vehicle restart, and cannot disagree with
//! what is applied. A redelivered or replayed message whose id the ledger
//! holds is not applied again. If the vehicle lost its desired state, it
//! lost the ledger with it, and applying the retained message again is
//! then exactly right.

use std::collections::{BTreeMap, BTreeSet};

use ank_common::complete_state::ConfigItem;
use ank_common::convert::{PartialCompleteState, PartialState, PartialWorkload};
use ank_common::manifest::{UnknownFields, parse_manifest_checked};
use ank_common::names::validate_config_name;

use crate::payload::Desired;

/// The config item of the vehicle's desired state that records rollouts.
pub const LEDGER_CONFIG: &str = "fleet-rollout";
/// How many applied rollout ids the ledger remembers.
pub const LEDGER_DEPTH: usize = 32;

/// The fleet's record in the vehicle's desired state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The rollout the desired state holds now.
    pub current: Option<String>,
    /// Rollout ids applied here, oldest first, at most [`LEDGER_DEPTH`].
    pub applied: Vec<String>,
    /// What `current` set, so the next rollout can remove what it drops.
    pub workloads: BTreeSet<String>,
    pub configs: BTreeSet<String>,
    pub groups: BTreeSet<String>,
    /// The sequence number of the signed message that set `current` (0
    /// when unsigned): the floor below which a message is a replay, kept
    /// here so it survives a connector restart with the manifest it
    /// belongs to.
    pub seq: u64,
}

fn string(item: &ConfigItem) -> Option<&str> {
    match item {
        ConfigItem::String(s) => Some(s),
        _ => None,
    }
}

fn strings(item: Option<&ConfigItem>) -> Vec<String> {
    match item {
        Some(ConfigItem::Array(items)) => items.iter().filter_map(string).map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

fn array<'a>(names: impl IntoIterator<Item = &'a String>) -> ConfigItem {
    ConfigItem::Array(names.into_iter().cloned().map(ConfigItem::String).collect())
}

impl Ledger {
    /// The ledger a desired state's config item holds (empty if none or
    /// not of this shape).
    pub fn from_config(item: Option<&ConfigItem>) -> Self {
        let Some(ConfigItem::Object(fields)) = item else { return Self::default() };
        Self {
            current: fields.get("current").and_then(string).filter(|s| !s.is_empty()).map(str::to_owned),
            applied: strings(fields.get("applied")),
            workloads: strings(fields.get("workloads")).into_iter().collect(),
            configs: strings(fields.get("configs")).into_iter().collect(),
            groups: strings(fields.get("groups")).into_iter().collect(),
            seq: fields.get("seq").and_then(string).and_then(|s| s.parse().ok()).unwrap_or(0),
        }
    }

    /// The config item that stores this ledger.
    pub fn to_config(&self) -> ConfigItem {
        let mut fields = BTreeMap::new();
        fields.insert("current".to_owned(), ConfigItem::String(self.current.clone().unwrap_or_default()));
        fields.insert("applied".to_owned(), array(&self.applied));
        fields.insert("workloads".to_owned(), array(&self.workloads));
        fields.insert("configs".to_owned(), array(&self.configs));
        fields.insert("groups".to_owned(), array(&self.groups));
        fields.insert("seq".to_owned(), ConfigItem::String(self.seq.to_string()));
        ConfigItem::Object(fields)
    }

    /// Checks the names the ledger holds before they become field-mask
    /// segments of an update (a name with `.` or `*` would reach other
    /// parts of the state): workload, config and group names as a
    /// manifest allows them, rollout ids as a topic level allows them.
    pub fn check(&self) -> Result<(), String> {
        let bad = |e: &dyn std::fmt::Display| {
            format!("the ledger (config '{LEDGER_CONFIG}') is refused: {e}; fix or remove that config")
        };
        for (kind, names) in
            [("ledger workload", &self.workloads), ("ledger config", &self.configs), ("ledger group", &self.groups)]
        {
            for name in names {
                validate_config_name(kind, name).map_err(|e| bad(&e))?;
            }
        }
        for id in self.applied.iter().chain(&self.current) {
            if let Err(e) = crate::topics::check_id("rollout id", id) {
                return Err(bad(&e));
            }
        }
        Ok(())
    }

    /// Whether the rollout `id` was applied here already.
    pub fn has(&self, id: &str) -> bool {
        self.applied.iter().any(|a| a == id)
    }
}

/// What the connector knows of its vehicle when it plans an apply.
#[derive(Debug, Clone)]
pub struct ApplyContext {
    /// The agent for workloads that name none (and no agent selector).
    pub default_agent: Option<String>,
    /// The connector's own workload, which the fleet may not change.
    pub own_workload: String,
}

/// One update of the vehicle's desired state.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub new_state: PartialCompleteState,
    pub update_mask: Vec<String>,
    /// The ledger after the update.
    pub ledger: Ledger,
}

/// Plans the update for `desired`, or says why the manifest is refused as
/// a whole.
pub fn plan(desired: &Desired, ledger: &Ledger, ctx: &ApplyContext) -> Result<Plan, String> {
    let source = format!("rollout '{}'", desired.rollout_id);
    let (mut state, warnings) =
        parse_manifest_checked(&source, &desired.manifest, UnknownFields::Warn).map_err(|e| e.to_string())?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    if state.workloads.keys().any(|n| n.to_string() == ctx.own_workload) {
        return Err(format!("{source}: the workload '{}' is the fleet connector itself", ctx.own_workload));
    }
    if state.configs.contains_key(LEDGER_CONFIG) {
        return Err(format!("{source}: the config '{LEDGER_CONFIG}' is the fleet's own record"));
    }
    for (name, workload) in &mut state.workloads {
        if workload.agent.is_empty() && workload.agent_selector.is_none() {
            match &ctx.default_agent {
                Some(agent) => workload.agent = agent.clone(),
                None => {
                    return Err(format!(
                        "{source}: workload '{name}' names no agent and the connector has no --default-agent"
                    ));
                }
            }
        }
    }

    let mut next = Ledger {
        current: Some(desired.rollout_id.clone()),
        applied: ledger.applied.clone(),
        workloads: state.workloads.keys().map(ToString::to_string).collect(),
        configs: state.configs.keys().cloned().collect(),
        groups: state.groups.keys().cloned().collect(),
        seq: desired.seq.max(ledger.seq),
    };
    next.applied.retain(|a| a != &desired.rollout_id);
    next.applied.push(desired.rollout_id.clone());
    let excess = next.applied.len().saturating_sub(LEDGER_DEPTH);
    next.applied.drain(..excess);

    let workload_names: BTreeSet<&String> = next.workloads.union(&ledger.workloads).collect();
    let config_names: BTreeSet<&String> = next.configs.union(&ledger.configs).collect();
    let group_names: BTreeSet<&String> = next.groups.union(&ledger.groups).collect();
    let mut update_mask: Vec<String> = workload_names.iter().map(|n| format!("desiredState.workloads.{n}")).collect();
    update_mask.extend(config_names.iter().map(|n| format!("desiredState.configs.{n}")));
    update_mask.extend(group_names.iter().map(|n| format!("desiredState.groups.{n}")));
    update_mask.push(format!("desiredState.configs.{LEDGER_CONFIG}"));

    let mut configs: BTreeMap<String, ConfigItem> = state.configs.clone();
    configs.insert(LEDGER_CONFIG.to_owned(), next.to_config());
    let mut desired_state = PartialState::current();
    desired_state.workloads =
        Some(state.workloads.iter().map(|(n, w)| (n.to_string(), PartialWorkload::from(w))).collect());
    desired_state.configs = Some(configs);
    if !state.groups.is_empty() {
        desired_state.groups = Some(state.groups.clone());
    }
    Ok(Plan { new_state: PartialCompleteState::of_desired(desired_state), update_mask, ledger: next })
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP_V1: &str = "apiVersion: v1
workloads:
  app:
    runtime: podman
    runtimeConfig: |
      image: localhost/busybox:latest
  helper:
    runtime: podman
    agent: other
    runtimeConfig: |
      image: localhost/busybox:latest
configs:
  port: \"8080\"
";

    fn ctx() -> ApplyContext {
        ApplyContext { default_agent: Some("v01".into()), own_workload: "fleet-connector".into() }
    }

    fn desired(id: &str, manifest: &str) -> Desired {
        Desired::unsigned(id, manifest)
    }

    #[test]
    fn a_plan_sets_the_manifest_and_the_ledger_under_one_mask() {
        let plan = plan(&desired("r1", APP_V1), &Ledger::default(), &ctx()).unwrap();
        assert_eq!(
            plan.update_mask,
            [
                "desiredState.workloads.app",
                "desiredState.workloads.helper",
                "desiredState.configs.port",
                "desiredState.configs.fleet-rollout"
            ]
        );
        let ds = plan.new_state.desired_state.unwrap();
        let workloads = ds.workloads.unwrap();
        assert_eq!(workloads["app"].agent.as_deref(), Some("v01"), "the default agent fills a missing one");
        assert_eq!(workloads["helper"].agent.as_deref(), Some("other"));
        let ledger = Ledger::from_config(ds.configs.as_ref().unwrap().get(LEDGER_CONFIG));
        assert_eq!(ledger, plan.ledger);
        assert_eq!(ledger.current.as_deref(), Some("r1"));
        assert_eq!(ledger.applied, ["r1"]);
        assert!(ledger.has("r1") && !ledger.has("r2"));
    }

    #[test]
    fn the_next_rollout_removes_what_the_previous_one_set_and_it_no_longer_names() {
        let first = plan(&desired("r1", APP_V1), &Ledger::default(), &ctx()).unwrap();
        let only_app = "apiVersion: v1\nworkloads:\n  app:\n    runtime: podman\n    runtimeConfig: \"image: x\"\n";
        let second = plan(&desired("r2", only_app), &first.ledger, &ctx()).unwrap();
        assert!(second.update_mask.contains(&"desiredState.workloads.helper".to_owned()));
        assert!(second.update_mask.contains(&"desiredState.configs.port".to_owned()));
        let ds = second.new_state.desired_state.unwrap();
        assert!(!ds.workloads.unwrap().contains_key("helper"), "masked but absent: removed");
        assert_eq!(second.ledger.applied, ["r1", "r2"]);
        assert_eq!(second.ledger.workloads, BTreeSet::from(["app".to_owned()]));
    }

    #[test]
    fn an_invalid_manifest_is_refused_as_a_whole_with_the_reason() {
        let bad = "apiVersion: v1\nworkloads:\n  app:\n    runtime: podman\n    restartPolicy: SOMETIMES\n";
        let e = plan(&desired("r9", bad), &Ledger::default(), &ctx()).unwrap_err();
        assert!(e.contains("rollout 'r9'"), "{e}");
        let own = "apiVersion: v1\nworkloads:\n  fleet-connector:\n    runtime: podman\n    runtimeConfig: \"\"\n";
        let e = plan(&desired("r9", own), &Ledger::default(), &ctx()).unwrap_err();
        assert!(e.contains("is the fleet connector itself"), "{e}");
        let no_agent = ApplyContext { default_agent: None, ..ctx() };
        let e = plan(&desired("r9", APP_V1), &Ledger::default(), &no_agent).unwrap_err();
        assert!(e.contains("workload 'app' names no agent"), "{e}");
        let ledger_name = "apiVersion: v1\nconfigs:\n  fleet-rollout: x\n";
        assert!(plan(&desired("r9", ledger_name), &Ledger::default(), &ctx()).is_err());
    }

    #[test]
    fn the_ledger_keeps_the_latest_ids_and_survives_its_config_form() {
        let mut ledger = Ledger::default();
        for i in 0..40 {
            ledger = plan(&desired(&format!("r{i}"), APP_V1), &ledger, &ctx()).unwrap().ledger;
        }
        assert_eq!(ledger.applied.len(), LEDGER_DEPTH);
        assert_eq!(ledger.applied.first().map(String::as_str), Some("r8"));
        assert_eq!(Ledger::from_config(Some(&ledger.to_config())), ledger);
        assert_eq!(Ledger::from_config(Some(&ConfigItem::String("junk".into()))), Ledger::default());
    }
}
