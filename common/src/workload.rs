//! The desired-state description of one workload as manifests, `ank get
//! state` and the server hold it (camelCase YAML/JSON), plus the value types
//! it is made of and the reported [`WorkloadState`].

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::conditions::InstanceStatus;
use crate::execution_state::ExecutionState;
use crate::health_spec::HealthSpecError;
use crate::instance_name::WorkloadInstanceName;
use crate::names::{AgentName, WorkloadName};
use crate::workload_policy::{AgentSelector, Migration, WorkloadPolicy};

/// When the agent restarts a workload that ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RestartPolicy {
    /// Never restarted.
    #[default]
    Never,
    /// Restarted when it failed.
    OnFailure,
    /// Restarted whenever it ended.
    Always,
}

/// State a dependency must reach before its dependent is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum AddCondition {
    /// The dependency runs.
    #[serde(rename = "ADD_COND_RUNNING")]
    Running,
    /// The dependency ended successfully.
    #[serde(rename = "ADD_COND_SUCCEEDED")]
    Succeeded,
    /// The dependency failed.
    #[serde(rename = "ADD_COND_FAILED")]
    Failed,
}

/// A file mounted read-only into the workload.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub mount_point: String,
    #[serde(flatten)]
    pub content: FileContent,
}

/// Text or base64 content of a [`File`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FileContent {
    Data(String),
    BinaryData(String),
}

/// Operation a state rule grants or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ReadWrite {
    /// No access.
    Nothing,
    /// Reading.
    Read,
    /// Writing.
    Write,
    /// Reading and writing.
    ReadWrite,
}

/// One allow or deny rule of the control interface.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum AccessRule {
    #[serde(rename_all = "camelCase")]
    StateRule {
        operation: ReadWrite,
        #[serde(alias = "filterMask")]
        filter_masks: Vec<String>,
    },
    #[serde(rename_all = "camelCase")]
    LogRule { workload_names: Vec<String> },
}

/// Which parts of the control interface a workload may use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ControlInterfaceAccess {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_rules: Vec<AccessRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_rules: Vec<AccessRule>,
}

/// One workload of the desired state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// Target agent; empty means not scheduled. May hold a template.
    #[serde(default, deserialize_with = "agent_field")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = crate::schema_parts::AGENT_PATTERN)))]
    pub agent: String,
    #[serde(default)]
    pub restart_policy: RestartPolicy,
    #[serde(default)]
    pub dependencies: BTreeMap<WorkloadName, AddCondition>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub runtime: String,
    /// Stored without leading and trailing whitespace, as Ankaios (>= 1.0)
    /// keeps it, so a `|` block hashes to the same instance name there and
    /// here.
    #[serde(deserialize_with = "trimmed")]
    pub runtime_config: String,
    #[serde(default)]
    pub control_interface_access: ControlInterfaceAccess,
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(schema_with = "crate::schema_parts::config_alias_map"))]
    pub configs: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    /// Start order on its agent: higher first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub priority: Option<u32>,
    /// The priority the agent orders by: the highest priority of this
    /// workload and of every workload that depends on it, directly or not.
    /// Computed by the server; a value written in a manifest is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub effective_priority: Option<u32>,
    #[serde(default, skip_serializing_if = "WorkloadPolicy::is_default")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub policy: WorkloadPolicy,
    /// Placement by constraints; exclusive with `agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub agent_selector: Option<AgentSelector>,
    #[serde(default, skip_serializing_if = "Migration::is_default")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub migration: Migration,
    /// How long a finished workload stays in the desired state (`1h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub ttl_after_finished: Option<String>,
    /// Holds off the other probes until it succeeded once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub startup_probe: Option<crate::health_spec::Probe>,
    /// Restarts the workload (under its restart policy) when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub liveness_probe: Option<crate::health_spec::Probe>,
    /// Decides whether a running workload is Available (and so Ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub readiness_probe: Option<crate::health_spec::Probe>,
    /// Delays and limits restarts of a crash-looping workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub restart_backoff: Option<crate::health_spec::RestartBackoff>,
    /// Gates a change of the spec on health, with automatic revert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-extension" = true)))]
    pub update: Option<crate::health_spec::UpdateGate>,
}

impl Workload {
    /// Checks the health fields of this workload (at apply).
    pub fn validate_health(&self) -> Result<(), HealthSpecError> {
        for (field, probe) in [
            ("startupProbe", &self.startup_probe),
            ("livenessProbe", &self.liveness_probe),
            ("readinessProbe", &self.readiness_probe),
        ] {
            if let Some(p) = probe {
                p.validate(field)?;
            }
        }
        if let Some(b) = &self.restart_backoff {
            b.settings()?;
        }
        if let Some(g) = &self.update {
            g.settings()?;
        }
        Ok(())
    }

    /// Whether the workload has any health field set.
    pub fn has_health_fields(&self) -> bool {
        self.startup_probe.is_some()
            || self.liveness_probe.is_some()
            || self.readiness_probe.is_some()
            || self.restart_backoff.is_some()
            || self.update.is_some()
    }

    /// The priority the agent orders by (effective, else own, else 0).
    pub fn start_priority(&self) -> u32 {
        self.effective_priority.or(self.priority).unwrap_or(0)
    }
}

/// Validates a literal agent name right where it is read (so YAML errors
/// carry its position); templated values are validated after rendering.
fn agent_field<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if !s.contains("{{") {
        AgentName::new(s.as_str()).map_err(serde::de::Error::custom)?;
    }
    Ok(s)
}

/// A string without its leading and trailing (Unicode) whitespace.
fn trimmed<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    Ok(match s.trim() {
        t if t.len() == s.len() => s,
        t => t.to_owned(),
    })
}

/// A workload as handed to one agent: its rendered spec and instance name,
/// and the generation of that spec (0 when the server did not say).
///
/// Two specs are equal when they run the same thing: the generation is
/// left out, so a server that restarted and counts from 1 again does not
/// make an agent replace what it runs.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    pub instance_name: WorkloadInstanceName,
    pub workload: Workload,
    pub generation: u64,
}

impl PartialEq for WorkloadSpec {
    fn eq(&self, other: &Self) -> bool {
        self.instance_name == other.instance_name && self.workload == other.workload
    }
}

impl Eq for WorkloadSpec {}

impl WorkloadSpec {
    /// Builds the spec of `name` with its instance name from the rendered
    /// runtime config.
    pub fn new(name: &WorkloadName, agent: &AgentName, workload: Workload) -> Self {
        let instance_name = WorkloadInstanceName::new(name, agent, &workload.runtime_config);
        Self { instance_name, workload, generation: 0 }
    }

    /// The same spec at `generation`.
    pub fn at_generation(mut self, generation: u64) -> Self {
        self.generation = generation;
        self
    }

    /// The workload's name.
    pub fn name(&self) -> &str {
        &self.instance_name.workload_name
    }
}

/// The reported execution state of one workload instance, with the
/// generation and conditions this orchestrator adds (empty from Ankaios).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadState {
    pub instance_name: WorkloadInstanceName,
    pub execution_state: ExecutionState,
    pub status: InstanceStatus,
}

impl WorkloadState {
    pub fn new(instance_name: WorkloadInstanceName, execution_state: ExecutionState) -> Self {
        Self { instance_name, execution_state, status: InstanceStatus::default() }
    }

    /// The same state with `status`.
    pub fn with_status(mut self, status: InstanceStatus) -> Self {
        self.status = status;
        self
    }
}

#[cfg(feature = "schema")]
mod schema {
    //! The schemas of the workload types whose serde shape the derive
    //! cannot describe.

    use serde_json::Value;

    use super::{AccessRule, File, ReadWrite};
    use crate::schema_parts::{FILTER_MASK_PATTERN, LOG_RULE_NAME_PATTERN, MAX_NAME_LENGTH};

    /// A file entry: a mount point and its text (`data`) or base64 content
    /// (`binaryData`).
    impl schemars::JsonSchema for File {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            std::borrow::Cow::Borrowed("File")
        }

        fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
            let content = |key: &str, what: &str| {
                serde_json::json!({
                    "type": "object",
                    "properties": { key: { "type": "string", "description": what } },
                    "required": [key],
                })
            };
            schemars::json_schema!({
                "description": "A file mounted read-only into the workload.",
                "type": "object",
                "properties": {
                    "mountPoint": { "type": "string", "description": "Where the file appears in the workload." }
                },
                "anyOf": [content("data", "The file's text."), content("binaryData", "The file's content, base64-encoded.")],
                "required": ["mountPoint"],
            })
        }
    }

    /// An access rule: `type: StateRule` with `operation` and `filterMasks`, or
    /// `type: LogRule` with `workloadNames`.
    impl schemars::JsonSchema for AccessRule {
        fn schema_name() -> std::borrow::Cow<'static, str> {
            std::borrow::Cow::Borrowed("AccessRule")
        }

        fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
            let operation = generator.subschema_for::<ReadWrite>();
            let state_rule = serde_json::json!({
                "description": "Access to the parts of the state the field masks select.",
                "type": "object",
                "properties": {
                    "operation": { "allOf": [operation] },
                    "filterMasks": { "type": "array", "items": { "type": "string", "pattern": FILTER_MASK_PATTERN } },
                },
                "required": ["operation", "filterMasks"],
            });
            let log_rule = serde_json::json!({
                "description": "Access to the logs of the named workloads.",
                "type": "object",
                "properties": {
                    "workloadNames": {
                        "type": "array",
                        "items": { "type": "string", "minLength": 1, "maxLength": MAX_NAME_LENGTH + 1, "pattern": LOG_RULE_NAME_PATTERN },
                    },
                },
                "required": ["workloadNames"],
            });
            let variant = |name: &str, body: Value| {
                serde_json::json!({
                    "type": "object",
                    "properties": { "type": { "type": "string", "const": name } },
                    "allOf": [body],
                    "required": ["type"],
                })
            };
            schemars::json_schema!({
                "description": "One allow or deny rule of the control interface.",
                "type": "object",
                "oneOf": [variant("StateRule", state_rule), variant("LogRule", log_rule)],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sha256 of `image: docker.io/library/nginx\ncommandOptions: ["-p", "8081:80"]`
    /// (no trailing newline), computed with sha256sum.
    const TRIMMED_NGINX_ID: &str = "7d853558fc3ab36ad65ee7bfa35fd600b935f909e3344c41aecfd539ea793609";

    fn instance_id(workload: Workload) -> String {
        let spec =
            WorkloadSpec::new(&WorkloadName::new("nginx").unwrap(), &AgentName::new("agent_A").unwrap(), workload);
        spec.instance_name.id
    }

    #[test]
    fn runtime_config_of_a_block_is_trimmed_before_it_is_hashed() {
        let manifest = "apiVersion: v1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: docker.io/library/nginx\n      commandOptions: [\"-p\", \"8081:80\"]\n";
        let state = crate::manifest::parse_manifest("m.yaml", manifest).unwrap();
        let wl = state.workloads["nginx"].clone();
        assert_eq!(wl.runtime_config, "image: docker.io/library/nginx\ncommandOptions: [\"-p\", \"8081:80\"]");
        assert_eq!(instance_id(wl), TRIMMED_NGINX_ID);
    }

    #[test]
    fn runtime_config_from_json_loses_surrounding_whitespace_only() {
        let json = serde_json::json!({
            "agent": "agent_A",
            "runtime": "podman",
            "runtimeConfig": " \n\timage: docker.io/library/nginx\ncommandOptions: [\"-p\", \"8081:80\"]\n\n ",
        });
        let wl: Workload = serde_json::from_value(json).unwrap();
        assert_eq!(instance_id(wl), TRIMMED_NGINX_ID);
        let inner: Workload = serde_json::from_value(serde_json::json!({
            "runtime": "podman", "runtimeConfig": "a:  1\n\nb: 2"
        }))
        .unwrap();
        assert_eq!(inner.runtime_config, "a:  1\n\nb: 2", "whitespace inside stays");
    }
}
