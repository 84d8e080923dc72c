//! Manifest parsing: YAML text (apiVersion `v1`) into a validated desired
//! [`State`]. Errors name the source, the line and column and the field, so
//! `ank apply` and `ank-server -m` can say exactly what is wrong.
//!
//! Read as Ankaios reads manifests: plain scalars follow the YAML 1.2 core
//! schema (`yes`, `on`, `no` are strings, only `true`/`false` booleans), and
//! unknown fields are ignored, each with a warning naming the source, the
//! line and the field's path; [`UnknownFields::Reject`] (`ank apply --strict`,
//! `ank-server --strict-manifest`) refuses them instead.

use serde::Deserialize;

use crate::API_VERSION;
use crate::complete_state::State;

pub mod v01;

/// Why a manifest was rejected.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct ManifestError {
    /// File name or `<stdin>`.
    pub source_name: String,
    /// Human-readable description with line/column and field.
    pub message: String,
}

/// What is wrong with a desired state that parsed, naming the workload,
/// the group or the config and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StateError {
    #[error("field 'apiVersion': unsupported value '{0}', expected '{API_VERSION}'")]
    ApiVersion(String),
    #[error("workload '{0}': field 'runtime' must not be empty")]
    EmptyRuntime(String),
    /// `hint` is empty or says why a template was not rendered.
    #[error("workload '{workload}': field 'agent': {error}{hint}")]
    Agent { workload: String, error: crate::names::NameError, hint: &'static str },
    #[error("workload '{workload}': {error}")]
    Workload { workload: String, error: WorkloadError },
    #[error("configs: {0}")]
    ConfigKey(crate::names::NameError),
    #[error("workload '{workload}': field 'configs': {error}")]
    ConfigAlias { workload: String, error: crate::names::NameError },
    #[error(transparent)]
    Group(#[from] crate::groups::GroupError),
    #[error("dependency cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
}

/// What is wrong with the scheduling, health or access fields of one workload.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("fields 'agent' and 'agentSelector' are exclusive: set one of them")]
    AgentAndSelector,
    #[error(transparent)]
    Selector(#[from] crate::workload_policy::SelectorError),
    /// `ttlAfterFinished` is no duration; the text says why.
    #[error("field 'ttlAfterFinished': {0}")]
    Ttl(String),
    #[error(transparent)]
    Health(#[from] crate::health_spec::HealthSpecError),
    #[error(transparent)]
    Access(#[from] crate::access_rules::AccessRuleError),
}

#[derive(Deserialize)]
struct VersionProbe {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
}

/// What an unknown field of a manifest does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownFields {
    /// Ignored with a warning, as Ankaios ignores it.
    #[default]
    Warn,
    /// The manifest is refused.
    Reject,
}

/// The deprecated manifest version still accepted as input.
pub const DEPRECATED_API_VERSION: &str = "v0.1";

/// Parses and validates a manifest. `source_name` is used in errors.
pub fn parse_manifest(source_name: &str, text: &str) -> Result<State, ManifestError> {
    parse_manifest_with_warnings(source_name, text).map(|(state, _)| state)
}

/// Like [`parse_manifest`], also returning warnings for the user (a
/// deprecated `v0.1` manifest is converted to `v1`; an unknown field is
/// ignored).
pub fn parse_manifest_with_warnings(source_name: &str, text: &str) -> Result<(State, Vec<String>), ManifestError> {
    parse_manifest_checked(source_name, text, UnknownFields::Warn)
}

/// Like [`parse_manifest_with_warnings`], with unknown fields handled as
/// `unknown` says.
pub fn parse_manifest_checked(
    source_name: &str,
    text: &str,
    unknown: UnknownFields,
) -> Result<(State, Vec<String>), ManifestError> {
    let err = |message: String| ManifestError { source_name: source_name.to_owned(), message };
    // Checked first so a wrong version is reported as such, not as the
    // unknown fields an older schema may carry.
    let probe: VersionProbe = serde_saphyr::from_str(text).map_err(|e| err(describe(&e)))?;
    parse_manifest_of_version(source_name, text, unknown, probe.api_version.as_deref())
}

/// Like [`parse_manifest_checked`], for a caller that read the manifest's
/// `apiVersion` (`None`: the key is absent) from the same text already.
pub fn parse_manifest_of_version(
    source_name: &str,
    text: &str,
    unknown: UnknownFields,
    api_version: Option<&str>,
) -> Result<(State, Vec<String>), ManifestError> {
    let err = |message: String| ManifestError { source_name: source_name.to_owned(), message };
    match api_version {
        Some(API_VERSION) => {}
        Some(DEPRECATED_API_VERSION) => {
            let mut state = v01::parse(text).map_err(|e| err(e.to_string()))?;
            trim_runtime_configs(&mut state);
            validate_state(&state).map_err(|e| err(e.to_string()))?;
            let warning = format!(
                "{source_name}: apiVersion '{DEPRECATED_API_VERSION}' is deprecated; it was read as '{API_VERSION}' \
                 (tags become a key: value map)"
            );
            return Ok((state, vec![warning]));
        }
        Some(other) => {
            let line = line_of(text, "apiVersion:");
            return Err(err(format!(
                "line {line}: field 'apiVersion': unsupported value '{other}', expected '{API_VERSION}'"
            )));
        }
        None => return Err(err("field 'apiVersion' is missing; expected 'apiVersion: v1'".to_owned())),
    }
    let mut ignored: Vec<Vec<String>> = Vec::new();
    let state: State = serde_saphyr::with_deserializer_from_str_with_options(text, yaml_options(), |de| {
        serde_ignored::deserialize(de, |path| ignored.push(path_segments(&path)))
    })
    .map_err(|e| err(describe(&e)))?;
    let unknown_fields: Vec<String> = ignored
        .iter()
        .map(|path| {
            let at = line_of_path(text, path).map(|l| format!("line {l}: ")).unwrap_or_default();
            format!("{at}unknown field '{}'", path.join("."))
        })
        .collect();
    if unknown == UnknownFields::Reject
        && let Some(first) = unknown_fields.first()
    {
        return Err(err(format!("{first} (unknown fields are refused in strict mode)")));
    }
    validate_state(&state).map_err(|e| err(e.to_string()))?;
    let warnings = unknown_fields.into_iter().map(|f| format!("{source_name}: {f} is ignored")).collect();
    Ok((state, warnings))
}

/// YAML 1.2 core schema for plain scalars, as Ankaios' parser reads them.
pub fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true }
}

/// The keys (and list indices) leading to an ignored field.
pub(crate) fn path_segments(path: &serde_ignored::Path<'_>) -> Vec<String> {
    use serde_ignored::Path;
    let mut segments = Vec::new();
    let mut at = path;
    loop {
        at = match at {
            Path::Root => break,
            Path::Seq { parent, index } => {
                segments.push(index.to_string());
                parent
            }
            Path::Map { parent, key } => {
                segments.push(key.clone());
                parent
            }
            Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => parent,
        };
    }
    segments.reverse();
    segments
}

/// The line of the last key of `path`, found by looking for each key in
/// turn below the previous one; `None` when the text is not laid out so.
fn line_of_path(text: &str, path: &[String]) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0;
    let mut found = None;
    for key in path.iter().filter(|k| k.parse::<usize>().is_err()) {
        let offset = lines[from..].iter().position(|l| line_has_key(l, key))?;
        found = Some(from + offset);
        from += offset + 1;
    }
    found.map(|i| i + 1)
}

fn line_has_key(line: &str, key: &str) -> bool {
    let line = line.trim_start().trim_start_matches("- ").trim_start();
    [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")].iter().any(|k| line.starts_with(k.as_str()))
}

/// Ankaios keeps a manifest's runtimeConfig without leading and trailing
/// whitespace (a `|` block loses its final line break); the v0.1 reader
/// builds workloads itself, so they are trimmed here.
fn trim_runtime_configs(state: &mut State) {
    for wl in state.workloads.values_mut() {
        let trimmed = wl.runtime_config.trim();
        if trimmed.len() != wl.runtime_config.len() {
            wl.runtime_config = trimmed.to_owned();
        }
    }
}

/// Checks what the types alone do not: required non-empty fields.
pub fn validate_state(state: &State) -> Result<(), StateError> {
    if state.api_version != API_VERSION {
        return Err(StateError::ApiVersion(state.api_version.clone()));
    }
    for (name, wl) in &state.workloads {
        if wl.runtime.is_empty() {
            return Err(StateError::EmptyRuntime(name.to_string()));
        }
        // A template is rendered only for a workload with config aliases;
        // without them the value is the agent name as written.
        let templated = wl.agent.contains("{{") && !wl.configs.is_empty();
        if !templated {
            crate::names::AgentName::new(wl.agent.as_str()).map_err(|error| {
                let hint = if wl.agent.contains("{{") { " (a template needs the workload's configs)" } else { "" };
                StateError::Agent { workload: name.to_string(), error, hint }
            })?;
        }
    }
    for (name, wl) in &state.workloads {
        validate_scheduling(wl).map_err(|error| StateError::Workload { workload: name.to_string(), error })?;
    }
    for (name, wl) in &state.workloads {
        crate::access_rules::validate(&wl.control_interface_access)
            .map_err(|e| StateError::Workload { workload: name.to_string(), error: e.into() })?;
    }
    for key in state.configs.keys() {
        crate::names::validate_config_name("config key", key).map_err(StateError::ConfigKey)?;
    }
    for (name, wl) in &state.workloads {
        for (alias, key) in &wl.configs {
            crate::names::validate_config_name("config alias", alias)
                .and_then(|()| crate::names::validate_config_name("config key", key))
                .map_err(|error| StateError::ConfigAlias { workload: name.to_string(), error })?;
        }
    }
    crate::groups::validate(&state.groups)?;
    if let Some(cycle) = crate::dependency_graph::find_cycle(state) {
        return Err(StateError::Cycle(cycle));
    }
    Ok(())
}

/// The scheduling fields: `agent` and `agentSelector` exclusive, every
/// selector expression and the ttl parsed.
// [feature S1: agent and agentSelector are exclusive; expressions checked at apply]
fn validate_scheduling(wl: &crate::Workload) -> Result<(), WorkloadError> {
    if let Some(selector) = &wl.agent_selector {
        if !wl.agent.is_empty() {
            return Err(WorkloadError::AgentAndSelector);
        }
        selector.parse()?;
    }
    if let Some(ttl) = &wl.ttl_after_finished {
        crate::duration::parse_duration(ttl).map_err(|e| WorkloadError::Ttl(e.to_string()))?;
    }
    wl.validate_health()?;
    Ok(())
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.trim_start().starts_with(needle)).map_or(1, |i| i + 1)
}

/// One-line description of a YAML/serde error with its position.
pub(crate) fn describe(e: &serde_saphyr::Error) -> String {
    let text = e.to_string();
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid YAML").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match e.location() {
        Some(loc) if !first.contains("line") => {
            format!("line {}, column {}: {first}", loc.line(), loc.column())
        }
        _ => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::complete_state::ConfigItem;

    const GOOD: &str = "apiVersion: v1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    restartPolicy: ALWAYS\n    tags:\n      owner: me\n    dependencies:\n      db: ADD_COND_RUNNING\n    runtimeConfig: |\n      image: busybox\n";

    #[test]
    fn manifest_parses_valid_v1() {
        let s = parse_manifest("m.yaml", GOOD).unwrap();
        let wl = &s.workloads["nginx"];
        assert_eq!(wl.agent, "agent_A");
        assert_eq!(wl.runtime_config, "image: busybox", "trimmed, as Ankaios stores it");
        assert_eq!(wl.restart_policy, crate::RestartPolicy::Always);
        assert_eq!(wl.tags["owner"], "me");
    }

    #[test]
    fn manifest_error_wrong_api_version_names_line_and_field() {
        let e = parse_manifest("m.yaml", "\napiVersion: v7\nworkloads: {}\n").unwrap_err();
        assert_eq!(e.to_string(), "m.yaml: line 2: field 'apiVersion': unsupported value 'v7', expected 'v1'");
    }

    #[test]
    fn manifest_unknown_fields_are_ignored_with_a_warning_naming_line_and_field() {
        let text = GOOD.replace("    tags:", "    colour: red\n    tags:") + "extra:\n  deep: 1\n";
        let (state, warnings) = parse_manifest_with_warnings("m.yaml", &text).unwrap();
        assert_eq!(state, parse_manifest("m.yaml", GOOD).unwrap());
        assert_eq!(
            warnings,
            [
                "m.yaml: line 7: unknown field 'workloads.nginx.colour' is ignored",
                "m.yaml: line 14: unknown field 'extra' is ignored"
            ]
        );
        let rules = GOOD.replace(
            "    tags:",
            "    controlInterfaceAccess:\n      allowRules: []\n      futureRules: []\n    tags:",
        );
        let (_, warnings) = parse_manifest_with_warnings("m.yaml", &rules).unwrap();
        assert_eq!(
            warnings,
            ["m.yaml: line 9: unknown field 'workloads.nginx.controlInterfaceAccess.futureRules' is ignored"]
        );
    }

    #[test]
    fn manifest_unknown_field_is_an_error_in_strict_mode() {
        let text = GOOD.replace("    tags:", "    colour: red\n    tags:");
        let e = parse_manifest_checked("m.yaml", &text, UnknownFields::Reject).unwrap_err().to_string();
        assert_eq!(
            e,
            "m.yaml: line 7: unknown field 'workloads.nginx.colour' (unknown fields are refused in strict mode)"
        );
        assert!(parse_manifest_checked("m.yaml", GOOD, UnknownFields::Reject).is_ok());
    }

    #[test]
    fn manifest_config_values_follow_yaml_1_2_like_ankaios() {
        let text = "apiVersion: v1\nconfigs:\n  flags:\n    debug: yes\n    power: on\n    list: [no, off, y]\n    quoted: \"true\"\n";
        let s = parse_manifest("m.yaml", text).unwrap();
        let ConfigItem::Object(flags) = &s.configs["flags"] else { panic!("{:?}", s.configs) };
        assert_eq!(flags["debug"], ConfigItem::String("yes".into()));
        assert_eq!(flags["power"], ConfigItem::String("on".into()));
        assert_eq!(
            flags["list"],
            ConfigItem::Array(vec![
                ConfigItem::String("no".into()),
                ConfigItem::String("off".into()),
                ConfigItem::String("y".into())
            ])
        );
        assert_eq!(flags["quoted"], ConfigItem::String("true".into()));
        // As in Ankaios, a config value is a string, a list or a map: an
        // unquoted number or true/false is refused.
        for bad in ["port: 8080", "debug: true", "ratio: 0.5"] {
            let text = format!("apiVersion: v1\nconfigs:\n  c:\n    {bad}\n");
            assert!(parse_manifest("m.yaml", &text).is_err(), "{bad}");
        }
        // Strings of other fields keep what was written.
        let tags = GOOD.replace("owner: me", "owner: yes");
        assert_eq!(parse_manifest("m.yaml", &tags).unwrap().workloads["nginx"].tags["owner"], "yes");
    }

    #[test]
    fn manifest_workloads_and_configs_without_a_value_are_empty_as_in_ankaios() {
        let (state, warnings) =
            parse_manifest_with_warnings("m.yaml", "apiVersion: v1\nworkloads:\nconfigs:\n").unwrap();
        assert!(state.workloads.is_empty() && state.configs.is_empty());
        assert!(warnings.is_empty());
    }

    #[test]
    fn manifest_restart_policy_is_upper_case_as_in_ankaios() {
        let text = GOOD.replace("restartPolicy: ALWAYS", "restartPolicy: Always");
        assert!(parse_manifest("m.yaml", &text).is_err());
        let text = GOOD.replace("restartPolicy: ALWAYS", "restartPolicy: ON_FAILURE");
        assert_eq!(
            parse_manifest("m.yaml", &text).unwrap().workloads["nginx"].restart_policy,
            crate::RestartPolicy::OnFailure
        );
    }

    #[test]
    fn manifest_error_invalid_workload_name_names_line() {
        let text = GOOD.replace("  nginx:", "  ngi.nx:");
        let e = parse_manifest("m.yaml", &text).unwrap_err().to_string();
        assert!(e.contains("line 3"), "{e}");
        assert!(e.contains("'ngi.nx'"), "{e}");
    }

    #[test]
    fn manifest_error_duplicate_workload_names_line() {
        let text = format!("{GOOD}  nginx:\n    runtime: podman\n    runtimeConfig: x\n");
        let e = parse_manifest("m.yaml", &text).unwrap_err().to_string();
        assert!(e.contains("line 13"), "{e}");
        assert!(e.to_lowercase().contains("duplicate"), "{e}");
    }

    #[test]
    fn manifest_error_broken_yaml_names_line() {
        let e = parse_manifest("m.yaml", "apiVersion: v1\nworkloads:\n  a: [\n").unwrap_err().to_string();
        assert!(e.contains("line"), "{e}");
    }

    #[test]
    fn manifest_error_templated_agent_without_configs_is_an_invalid_name() {
        // Found by the manifest_parser fuzz target: the template was never
        // rendered, so the literal '{{...}}' passed as agent and the server
        // silently left the workload unscheduled.
        let text = GOOD.replace("agent: agent_A", "agent: \"{{where.agent}}\"");
        let e = parse_manifest("m.yaml", &text).unwrap_err().to_string();
        assert!(e.contains("workload 'nginx': field 'agent': agent name '{{where.agent}}' is invalid"), "{e}");
        assert!(e.contains("a template needs the workload's configs"), "{e}");
        let with_configs =
            format!("{text}    configs:\n      where: placement\nconfigs:\n  placement:\n    agent: agent_A\n");
        assert_eq!(parse_manifest("m.yaml", &with_configs).unwrap().workloads["nginx"].agent, "{{where.agent}}");
    }

    #[test]
    fn manifest_error_invalid_agent_and_missing_version() {
        let text = GOOD.replace("agent: agent_A", "agent: \"a b\"");
        let e = parse_manifest("m.yaml", &text).unwrap_err().to_string();
        assert!(e.contains("line 5") && e.contains("agent name 'a b'"), "{e}");
        let e = parse_manifest("m.yaml", "workloads: {}\n").unwrap_err().to_string();
        assert!(e.contains("'apiVersion' is missing"), "{e}");
    }

    // [test of feature S1: both agent and agentSelector, or a bad expression, fail the apply]
    #[test]
    fn manifest_scheduling_fields_parse_and_validate() {
        let text = "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    priority: 5\n    policy:\n      preemptEnabled: true\n    migration: rebalance\n    ttlAfterFinished: 1h\n    agentSelector:\n      labels: [\"arch = arm64\"]\n      rank:\n        - metric: free_memory_mb\n    runtimeConfig: 'image: busybox'\n";
        let s = parse_manifest("m.yaml", text).unwrap();
        let wl = &s.workloads["w"];
        assert_eq!(wl.priority, Some(5));
        assert!(wl.policy.preempt_enabled);
        assert_eq!(wl.migration, crate::workload_policy::Migration::Rebalance);
        assert_eq!(wl.agent_selector.as_ref().unwrap().rank[0].weight, 1.0);
        let both = text.replace("    priority: 5", "    agent: A\n    priority: 5");
        let e = parse_manifest("m.yaml", &both).unwrap_err().to_string();
        assert!(e.contains("workload 'w': fields 'agent' and 'agentSelector' are exclusive"), "{e}");
        let bad = text.replace("arch = arm64", "arch === x");
        let e = parse_manifest("m.yaml", &bad).unwrap_err().to_string();
        assert!(e.contains("agentSelector.labels[0]: unexpected '='"), "{e}");
        let ttl = text.replace("ttlAfterFinished: 1h", "ttlAfterFinished: soon");
        let e = parse_manifest("m.yaml", &ttl).unwrap_err().to_string();
        assert!(e.contains("ttlAfterFinished"), "{e}");
    }
}
