//! `ank apply [-d] [--agent A] FILE...|-`: reads and validates manifests
//! (before contacting the server), merges them, and sends one update that
//! sets (or with `-d` deletes) exactly the workloads, configs and groups
//! they name; then waits for the workloads.

use std::collections::BTreeMap;
use std::io::Read;

use ank_common::complete_state::ConfigItem;
use ank_common::convert::{PartialCompleteState, PartialState, PartialWorkload};
use ank_common::groups::Group;
use ank_common::manifest::{UnknownFields, parse_manifest_checked, parse_manifest_of_version};
use ank_common::messages::RequestContent;
use ank_common::{AgentName, State, Workload, WorkloadName};
use anyhow::{Context, bail};

use crate::cli::ApplyArgs;
use crate::cmd::{Ctx, update_and_follow};
use crate::manifest_scan::Scanned;

/// The name manifests read from standard input go by.
pub const STDIN_NAME: &str = "<stdin>";

/// A parsed manifest and where it came from.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub source: String,
    pub state: State,
    /// Its workloads that name no `agent` (and no `agentSelector`).
    pub without_agent: Vec<String>,
    /// Its workload names in the order the file has them.
    pub order: Vec<String>,
}

/// What Ankaios' `ank` answers to a workload without an agent when no
/// `--agent` is given.
pub const NO_AGENT: &str = "No agent name specified -> use '--agent' option to specify!";

/// The workloads of the manifest `text` that have neither an `agent` key
/// (an empty value counts as one, as in Ankaios) nor our `agentSelector`.
pub fn workloads_without_agent(text: &str) -> Vec<String> {
    crate::manifest_scan::scan(text).map(|s| s.without_agent()).unwrap_or_default()
}

/// The workload names of the manifest `text` in the order it has them
/// (the parsed state keeps them sorted).
pub fn workload_order(text: &str) -> Vec<String> {
    crate::manifest_scan::scan(text).map(|s| s.order).unwrap_or_default()
}

/// Why manifests cannot be combined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MergeError {
    #[error("workload '{name}' is defined in both '{first}' and '{second}'")]
    DuplicateWorkload { name: String, first: String, second: String },
    #[error("config '{name}' is defined in both '{first}' and '{second}'")]
    DuplicateConfig { name: String, first: String, second: String },
    #[error("group '{name}' is defined in both '{first}' and '{second}'")]
    DuplicateGroup { name: String, first: String, second: String },
}

/// The workloads and configs of all manifests, each with its source.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    pub workloads: BTreeMap<WorkloadName, (Workload, String)>,
    pub configs: BTreeMap<String, (ConfigItem, String)>,
    pub groups: BTreeMap<String, (Group, String)>,
    /// The workloads that name no agent.
    pub without_agent: Vec<String>,
    /// The workload names in the order of the files and within each file.
    pub order: Vec<String>,
}

/// Reads and parses every file (`-` is standard input). The first invalid
/// manifest ends this with its parse error unchanged; unknown fields are
/// ignored with a warning on standard error.
pub fn read_manifests(files: &[String]) -> anyhow::Result<Vec<Manifest>> {
    read_manifests_checked(files, UnknownFields::Warn)
}

/// Like [`read_manifests`], with unknown fields handled as `unknown` says
/// (`ank apply --strict` refuses them).
pub fn read_manifests_checked(files: &[String], unknown: UnknownFields) -> anyhow::Result<Vec<Manifest>> {
    let mut manifests = Vec::with_capacity(files.len());
    for file in files {
        let (source, text) = if file == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).context("cannot read the manifest from standard input")?;
            (STDIN_NAME.to_owned(), text)
        } else {
            let text = match std::fs::read_to_string(file) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!("File '{file}' not found!"),
                read => read.with_context(|| format!("cannot read the manifest '{file}'"))?,
            };
            (file.clone(), text)
        };
        // Read once for the schema, the version, the order and the agents;
        // the typed state is the parser's.
        let scanned = crate::manifest_scan::scan(&text);
        // Types first, as Ankaios' ank checks its schema before reading the state.
        if let Some(scanned) = &scanned {
            crate::manifest_schema::check_tree(&scanned.tree)?;
        }
        let (state, warnings) = match scanned.as_ref().and_then(|s| s.api_version()) {
            Some(version) => parse_manifest_of_version(&source, &text, unknown, version)?,
            None => parse_manifest_checked(&source, &text, unknown)?,
        };
        for warning in warnings {
            eprintln!("warning: {warning}");
        }
        let without_agent = scanned.as_ref().map(Scanned::without_agent).unwrap_or_default();
        let order = scanned.map(|s| s.order).unwrap_or_default();
        manifests.push(Manifest { source, state, without_agent, order });
    }
    Ok(manifests)
}

/// Combines manifests; a workload or config named in two of them is an
/// error naming both files.
pub fn merge(manifests: Vec<Manifest>) -> Result<Merged, MergeError> {
    let mut merged = Merged::default();
    for Manifest { source, state, without_agent, order } in manifests {
        merged.without_agent.extend(without_agent);
        merged.order.extend(order);
        for (name, workload) in state.workloads {
            if let Some((_, first)) = merged.workloads.get(&name) {
                return Err(MergeError::DuplicateWorkload {
                    name: name.to_string(),
                    first: first.clone(),
                    second: source,
                });
            }
            merged.workloads.insert(name, (workload, source.clone()));
        }
        for (name, item) in state.configs {
            if let Some((_, first)) = merged.configs.get(&name) {
                return Err(MergeError::DuplicateConfig { name, first: first.clone(), second: source });
            }
            merged.configs.insert(name, (item, source.clone()));
        }
        for (name, group) in state.groups {
            if let Some((_, first)) = merged.groups.get(&name) {
                return Err(MergeError::DuplicateGroup { name, first: first.clone(), second: source });
            }
            merged.groups.insert(name, (group, source.clone()));
        }
    }
    Ok(merged)
}

impl Merged {
    /// Runs every workload on `agent`.
    pub fn override_agent(&mut self, agent: &AgentName) {
        for (workload, _) in self.workloads.values_mut() {
            workload.agent = agent.to_string();
        }
    }

    /// Gives every workload without its own `update` the gate `gate`
    /// (`ank apply --healthy-deadline ...`); checked as the manifest's own.
    pub fn gate_updates(&mut self, gate: &ank_common::health_spec::UpdateGate) -> anyhow::Result<()> {
        gate.settings().map_err(|e| {
            let flags = [
                ("field 'update.healthyDeadline'", "option '--healthy-deadline'"),
                ("field 'update.minHealthyTime'", "option '--min-healthy-time'"),
                ("'healthyDeadline'", "'--healthy-deadline'"),
            ];
            anyhow::anyhow!("{}", flags.iter().fold(e.to_string(), |e, (field, flag)| e.replace(field, flag)))
        })?;
        for (workload, _) in self.workloads.values_mut() {
            if workload.update.is_none() {
                workload.update = Some(gate.clone());
            }
        }
        Ok(())
    }

    /// Whether the manifests named nothing.
    pub fn is_empty(&self) -> bool {
        self.workloads.is_empty() && self.configs.is_empty() && self.groups.is_empty()
    }

    /// The update request: one mask per workload and config; the new state
    /// holds them, or with `delete` none of them, so they are removed.
    pub fn update_request(&self, delete: bool) -> anyhow::Result<RequestContent> {
        let mut update_mask: Vec<String> =
            self.workloads.keys().map(|n| format!("desiredState.workloads.{n}")).collect();
        update_mask.extend(self.configs.keys().map(|n| format!("desiredState.configs.{n}")));
        update_mask.extend(self.groups.keys().map(|n| format!("desiredState.groups.{n}")));
        let mut desired = PartialState::current();
        if !delete {
            let workloads = self.workloads.iter().map(|(n, (w, _))| (n.to_string(), PartialWorkload::from(w)));
            desired.workloads = Some(workloads.collect());
            desired.configs = Some(self.configs.iter().map(|(n, (c, _))| (n.clone(), c.clone())).collect());
            if !self.groups.is_empty() {
                desired.groups = Some(self.groups.iter().map(|(n, (g, _))| (n.clone(), g.clone())).collect());
            }
        }
        Ok(RequestContent::UpdateState { new_state: Box::new(PartialCompleteState::of_desired(desired)), update_mask })
    }

    /// The runtime of each workload, for the wait table.
    pub fn runtimes(&self) -> BTreeMap<String, String> {
        self.workloads.iter().map(|(n, (w, _))| (n.to_string(), w.runtime.clone())).collect()
    }
}

/// Applies (or deletes) the manifests and waits for the workloads.
pub async fn run(ctx: &mut Ctx<'_>, args: ApplyArgs) -> anyhow::Result<()> {
    let unknown = if args.strict { UnknownFields::Reject } else { UnknownFields::Warn };
    let mut merged = merge(read_manifests_checked(&args.files, unknown)?)?;
    match &args.agent {
        Some(agent) => {
            let agent = AgentName::new(agent.as_str()).context("invalid value of --agent")?;
            merged.override_agent(&agent);
        }
        // Ankaios refuses a workload without an agent unless --agent names one.
        None if !args.delete && !merged.without_agent.is_empty() => bail!(NO_AGENT),
        None => {}
    }
    // [feature: issue 39, a health gate per apply]
    if let Some(gate) = args.update_gate().filter(|_| !args.delete) {
        merged.gate_updates(&gate)?;
    }
    if merged.is_empty() {
        // An update without masks would replace the whole desired state.
        if !ctx.settings.quiet {
            ctx.print("Nothing to update.\n")?;
        }
        return Ok(());
    }
    let request = merged.update_request(args.delete)?;
    update_and_follow(ctx, request, merged.runtimes(), &merged.order).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use ank_common::manifest::parse_manifest;

    fn manifest(source: &str, yaml: &str) -> Manifest {
        Manifest {
            source: source.into(),
            state: parse_manifest(source, yaml).unwrap(),
            without_agent: workloads_without_agent(yaml),
            order: workload_order(yaml),
        }
    }

    const A: &str = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: nginx\nconfigs:\n  port: \"80\"\n";
    const B: &str = "apiVersion: v1\nworkloads:\n  db:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: \"image: pg\"\n";

    #[test]
    fn apply_request_sets_workloads_and_configs_under_masks() {
        let merged = merge(vec![manifest("a.yaml", A), manifest("b.yaml", B)]).unwrap();
        let RequestContent::UpdateState { new_state, update_mask } = merged.update_request(false).unwrap() else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(
            update_mask,
            vec!["desiredState.workloads.db", "desiredState.workloads.web", "desiredState.configs.port"]
        );
        let desired = &new_state["desiredState"];
        assert_eq!(desired["apiVersion"], "v1");
        assert_eq!(desired["workloads"]["web"]["runtimeConfig"], "image: nginx", "trimmed, as Ankaios stores it");
        assert_eq!(desired["workloads"]["db"]["agent"], "agent_B");
        assert_eq!(desired["configs"]["port"], "80");
        ank_common::convert::complete_state_from_json(&new_state).unwrap();
    }

    #[test]
    fn apply_gate_flags_gate_the_workloads_without_their_own() {
        const GATED: &str = "apiVersion: v1\nworkloads:\n  db:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: \"image: pg\"\n    update: {healthyDeadline: 5m}\n";
        let mut m = merge(vec![manifest("a.yaml", A), manifest("g.yaml", GATED)]).unwrap();
        let gate = ank_common::health_spec::UpdateGate {
            healthy_deadline: Some("60s".into()),
            min_healthy_time: None,
            auto_revert: Some(true),
        };
        m.gate_updates(&gate).unwrap();
        let web = &m.workloads[&WorkloadName::new("web").unwrap()].0;
        assert_eq!(web.update.as_ref(), Some(&gate), "the flags gate a workload without its own");
        let db = &m.workloads[&WorkloadName::new("db").unwrap()].0;
        assert_eq!(db.update.as_ref().unwrap().healthy_deadline.as_deref(), Some("5m"), "its own gate stays");
        let bad = ank_common::health_spec::UpdateGate { healthy_deadline: Some("soon".into()), ..gate };
        let e = m.gate_updates(&bad).unwrap_err().to_string();
        assert!(e.starts_with("option '--healthy-deadline': ") && e.contains("soon"), "{e}");
        let short = ank_common::health_spec::UpdateGate { healthy_deadline: Some("5s".into()), ..bad };
        let e = m.gate_updates(&short).unwrap_err().to_string();
        assert_eq!(e, "option '--min-healthy-time' must be shorter than '--healthy-deadline'");
    }

    #[test]
    fn apply_delete_request_has_masks_but_no_workloads() {
        let merged = merge(vec![manifest("a.yaml", A)]).unwrap();
        let RequestContent::UpdateState { new_state, update_mask } = merged.update_request(true).unwrap() else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(update_mask, vec!["desiredState.workloads.web", "desiredState.configs.port"]);
        assert_eq!(new_state, json!({"desiredState": {"apiVersion": "v1"}}));
    }

    // [test of feature K6: a manifest's groups are applied and deleted with it]
    #[test]
    fn apply_request_carries_the_groups_of_the_manifests() {
        let grouped = format!("{B}groups:\n  nightly:\n    members: [db]\n    priority: 7\n");
        let merged = merge(vec![manifest("a.yaml", A), manifest("g.yaml", &grouped)]).unwrap();
        let RequestContent::UpdateState { new_state, update_mask } = merged.update_request(false).unwrap() else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert!(update_mask.contains(&"desiredState.groups.nightly".to_owned()), "{update_mask:?}");
        assert_eq!(new_state["desiredState"]["groups"]["nightly"]["priority"], 7);
        let cs = ank_common::convert::complete_state_from_json(&new_state).unwrap();
        assert_eq!(cs.desired_state.unwrap().groups.unwrap().groups["nightly"].members, ["db"]);
        let RequestContent::UpdateState { new_state, update_mask } = merged.update_request(true).unwrap() else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert!(update_mask.contains(&"desiredState.groups.nightly".to_owned()));
        assert!(new_state["desiredState"].get("groups").is_none());
        let twice = merge(vec![manifest("g.yaml", &grouped), manifest("h.yaml", &grouped)]).unwrap_err();
        assert!(twice.to_string().starts_with("workload 'db' is defined in both"), "{twice}");
        let other = "apiVersion: v1\ngroups:\n  nightly:\n    members: [web]\n";
        let err = merge(vec![manifest("g.yaml", &grouped), manifest("o.yaml", other)]).unwrap_err();
        assert_eq!(err.to_string(), "group 'nightly' is defined in both 'g.yaml' and 'o.yaml'");
        // Only a group: not empty.
        assert!(!merge(vec![manifest("o.yaml", other)]).unwrap().is_empty());
    }

    #[test]
    fn apply_finds_workloads_without_agent_as_ankaios_does() {
        let text = "apiVersion: v1\nworkloads:\n  none:\n    runtime: podman\n    runtimeConfig: x\n  empty:\n    runtime: podman\n    agent: \"\"\n    runtimeConfig: x\n  placed:\n    runtime: podman\n    agentSelector:\n      labels: [\"arch == arm64\"]\n    runtimeConfig: x\n";
        assert_eq!(workloads_without_agent(text), ["none"], "an empty agent and a selector count as given");
        assert!(workloads_without_agent(A).is_empty());
        let merged = merge(vec![manifest("a.yaml", A), manifest("n.yaml", text)]).unwrap();
        assert_eq!(merged.without_agent, ["none"]);
    }

    #[test]
    fn apply_agent_override_sets_every_workload() {
        let mut merged = merge(vec![manifest("a.yaml", A), manifest("b.yaml", B)]).unwrap();
        merged.override_agent(&AgentName::new("agent_X").unwrap());
        assert!(merged.workloads.values().all(|(w, _)| w.agent == "agent_X"));
        assert_eq!(merged.runtimes()["db"], "podman");
    }

    #[test]
    fn apply_duplicate_workload_across_files_names_both() {
        let err = merge(vec![manifest("a.yaml", A), manifest("b.yaml", B), manifest("c.yaml", A)]).unwrap_err();
        assert_eq!(err.to_string(), "workload 'web' is defined in both 'a.yaml' and 'c.yaml'");
        let only_config = "apiVersion: v1\nconfigs:\n  port: \"81\"\n";
        let err = merge(vec![manifest("a.yaml", A), manifest("d.yaml", only_config)]).unwrap_err();
        assert_eq!(err.to_string(), "config 'port' is defined in both 'a.yaml' and 'd.yaml'");
    }

    #[test]
    fn apply_reads_files_and_keeps_parse_errors_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good.yaml");
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&good, A).unwrap();
        // Not YAML: the schema check leaves it to the parser.
        let not_yaml = "apiVersion: v1\nworkloads: [\n";
        std::fs::write(&bad, not_yaml).unwrap();
        let files = vec![good.display().to_string()];
        assert_eq!(read_manifests(&files).unwrap()[0].state.workloads.len(), 1);
        let files = vec![good.display().to_string(), bad.display().to_string()];
        let err = read_manifests(&files).unwrap_err();
        let expected = parse_manifest(&bad.display().to_string(), not_yaml).unwrap_err().to_string();
        assert_eq!(format!("{err:#}"), expected);
    }

    #[test]
    fn apply_ignores_unknown_fields_unless_strict() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.yaml");
        std::fs::write(&file, A.replace("runtime: podman", "runtime: podman\n    colour: red")).unwrap();
        let files = vec![file.display().to_string()];
        assert_eq!(read_manifests(&files).unwrap()[0].state.workloads.len(), 1);
        let err = read_manifests_checked(&files, UnknownFields::Reject).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            format!(
                "{}: line 5: unknown field 'workloads.web.colour' (unknown fields are refused in strict mode)",
                file.display()
            )
        );
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;

    #[test]
    fn workload_order_is_the_files_order() {
        let yaml = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n  db:\n    runtime: podman\n  api: {}\n";
        assert_eq!(workload_order(yaml), ["web", "db", "api"]);
        assert!(workload_order("apiVersion: v1\n").is_empty());
        assert!(workload_order("apiVersion: v1\nworkloads:\n").is_empty());
    }
}
