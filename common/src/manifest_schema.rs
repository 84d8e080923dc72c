//! The JSON schema of a manifest, generated from the desired-state types
//! ([`State`] and what it holds) for editors and for `ank apply`'s type
//! check, as Eclipse Ankaios ships its `ank_schema.json`. The committed copy
//! is `schema/ank_schema.json`; `cargo run -p ank-docgen -- --schema FILE`
//! writes it and a test checks that it is up to date.
//!
//! Fields this orchestrator adds to Ankaios' manifest carry
//! `"x-extension": true` and a description that starts with
//! [`EXTENSION_PREFIX`], so an editor shows them as ours.

use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::complete_state::State;

/// The keyword that marks a field Eclipse Ankaios does not have.
pub const EXTENSION_KEYWORD: &str = "x-extension";

/// How the description of an extension field starts.
pub const EXTENSION_PREFIX: &str = "Extension (not in Eclipse Ankaios).";

/// The characters of a workload name, a config key or alias, and of each
/// part of a field mask: the same set as Ankaios.
const NAME_CHARS: &str = "[a-zA-Z0-9_-]";

/// The longest workload name, config key or alias.
const MAX_NAME_LENGTH: u64 = 63;

/// The constraint on a name used as a map key (or a value naming a key).
fn name_schema(what: &str) -> Value {
    serde_json::json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_NAME_LENGTH,
        "pattern": format!("^{NAME_CHARS}+$"),
        "description": format!("{what}: 1 to {MAX_NAME_LENGTH} of the characters a-z, A-Z, 0-9, '_' and '-'."),
    })
}

/// A map whose keys are names (workloads, configs) and whose values are `T`.
pub(crate) fn name_keyed_map<T: schemars::JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let values = generator.subschema_for::<T>();
    schemars::json_schema!({
        "type": "object",
        "propertyNames": name_schema("A name"),
        "additionalProperties": values,
    })
}

/// A top-level map of names that may also be left empty (`workloads:`
/// with no value), as in Ankaios.
pub(crate) fn optional_name_keyed_map<T: schemars::JsonSchema>(
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    let map = name_keyed_map::<T>(generator);
    schemars::json_schema!({
        "anyOf": [map, { "type": "null" }],
        "default": {},
    })
}

/// A workload's `configs`: alias -> config key, both names.
pub(crate) fn config_alias_map(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "propertyNames": name_schema("A config alias"),
        "additionalProperties": name_schema("The config key the alias stands for"),
    })
}

/// The pattern of a workload's `agent`: a name, possibly with `{{a.b}}`
/// template references in it.
pub(crate) const AGENT_PATTERN: &str =
    r"^(?:[a-zA-Z0-9_-]*\{\{[a-zA-Z0-9_-]+(?:\.[a-zA-Z0-9_-]+)*\}\})*[a-zA-Z0-9_-]*$";

/// The pattern of a state rule's field mask: parts of name characters or
/// `*`, joined by dots.
pub(crate) const FILTER_MASK_PATTERN: &str = r"^(?:\*|[a-zA-Z0-9_-]+)(?:\.(?:\*|[a-zA-Z0-9_-]+))*$";

/// The pattern of a log rule's workload name: a name, `*`, or a name with
/// one `*` in it.
pub(crate) const LOG_RULE_NAME_PATTERN: &str = r"^(?:\*|[a-zA-Z0-9_-]*\*[a-zA-Z0-9_-]*|[a-zA-Z0-9_-]+)$";

/// A file entry: a mount point and its text (`data`) or base64 content
/// (`binaryData`).
impl schemars::JsonSchema for crate::workload::File {
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
impl schemars::JsonSchema for crate::workload::AccessRule {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("AccessRule")
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let operation = generator.subschema_for::<crate::workload::ReadWrite>();
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

/// The schema as a JSON value (draft-07, as Ankaios' schema).
pub fn manifest_schema() -> Value {
    let generator = SchemaSettings::draft07().into_generator();
    let schema = generator.into_root_schema_for::<State>();
    let mut value = schema.to_value();
    require_api_version(&mut value);
    mark_extensions(&mut value);
    if let Some(workload) = value.pointer_mut("/definitions/Workload") {
        set_extensions_apart(workload);
    }
    value
}

/// Moves a type's extension fields from `properties` into an `allOf` entry
/// of their own. They are checked all the same, and `properties` holds
/// Ankaios' fields only, so the validator (jsonschema 0.44, which treats
/// `properties` of 15 fields or more together with a two-field `required`
/// differently) judges a workload exactly as it judges Ankaios' schema.
fn set_extensions_apart(schema: &mut Value) {
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return };
    let names: Vec<String> = properties
        .iter()
        .filter(|(_, field)| field.get(EXTENSION_KEYWORD) == Some(&Value::Bool(true)))
        .map(|(name, _)| name.clone())
        .collect();
    if names.is_empty() {
        return;
    }
    let extensions: serde_json::Map<String, Value> =
        names.iter().filter_map(|name| properties.remove(name).map(|field| (name.clone(), field))).collect();
    if let Some(object) = schema.as_object_mut() {
        object.insert(
            "allOf".to_owned(),
            serde_json::json!([{ "description": EXTENSION_PREFIX, "properties": extensions }]),
        );
    }
}

/// A manifest must name its `apiVersion` (the type reads a missing one as
/// empty, to report it in its own words).
fn require_api_version(schema: &mut Value) {
    if let Some(api_version) = schema.pointer_mut("/properties/apiVersion").and_then(Value::as_object_mut) {
        api_version.remove("default");
    }
    if let Some(root) = schema.as_object_mut() {
        root.insert("required".to_owned(), serde_json::json!(["apiVersion"]));
    }
}

/// The schema as the committed file holds it: pretty JSON and a final
/// line break.
pub fn manifest_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&manifest_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Prefixes the description of every schema marked as an extension.
fn mark_extensions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get(EXTENSION_KEYWORD) == Some(&Value::Bool(true)) {
                let description = match map.get("description").and_then(Value::as_str) {
                    Some(text) => format!("{EXTENSION_PREFIX} {text}"),
                    None => EXTENSION_PREFIX.to_owned(),
                };
                map.insert("description".to_owned(), Value::String(description));
            }
            map.values_mut().for_each(mark_extensions);
        }
        Value::Array(items) => items.iter_mut().for_each(mark_extensions),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed copy, relative to this crate.
    const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../schema/ank_schema.json");

    #[test]
    fn committed_schema_is_what_the_types_generate() {
        let committed = std::fs::read_to_string(COMMITTED).expect("schema/ank_schema.json is committed");
        assert!(
            committed == manifest_schema_text(),
            "schema/ank_schema.json is out of date: run `cargo run -p ank-docgen -- --schema schema/ank_schema.json`"
        );
    }

    fn workload_properties(schema: &Value) -> &serde_json::Map<String, Value> {
        schema["definitions"]["Workload"]["properties"].as_object().expect("Workload has properties")
    }

    fn workload_extensions(schema: &Value) -> &serde_json::Map<String, Value> {
        schema["definitions"]["Workload"]["allOf"][0]["properties"].as_object().expect("extensions apart")
    }

    #[test]
    fn extension_fields_are_marked_and_ankaios_fields_are_not() {
        let schema = manifest_schema();
        let workload = workload_properties(&schema);
        let extensions = workload_extensions(&schema);
        let marked: Vec<&str> = extensions
            .iter()
            .filter(|(_, field)| field.get(EXTENSION_KEYWORD) == Some(&Value::Bool(true)))
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(
            marked,
            [
                "agentSelector",
                "effectivePriority",
                "livenessProbe",
                "migration",
                "policy",
                "priority",
                "readinessProbe",
                "restartBackoff",
                "startupProbe",
                "ttlAfterFinished",
                "update"
            ]
        );
        for name in marked {
            let description = extensions[name]["description"].as_str().unwrap_or_default();
            assert!(description.starts_with(EXTENSION_PREFIX), "{name}: {description}");
        }
        for ankaios in
            ["agent", "runtime", "runtimeConfig", "restartPolicy", "dependencies", "tags", "configs", "files"]
        {
            assert!(workload[ankaios].get(EXTENSION_KEYWORD).is_none(), "{ankaios} is Ankaios' own");
        }
        assert_eq!(workload.len(), 9, "Ankaios' nine workload fields stay alone in `properties`");
        assert_eq!(schema["properties"]["groups"][EXTENSION_KEYWORD], Value::Bool(true));
        assert!(schema["properties"]["workloads"].get(EXTENSION_KEYWORD).is_none());
    }

    #[test]
    fn runtime_fields_are_typed_strings_and_required() {
        let schema = manifest_schema();
        let workload = workload_properties(&schema);
        assert_eq!(workload["runtimeConfig"]["type"], "string");
        assert_eq!(workload["runtime"]["type"], "string");
        let required = schema["definitions"]["Workload"]["required"].as_array().expect("required fields");
        assert!(required.contains(&Value::from("runtime")) && required.contains(&Value::from("runtimeConfig")));
    }
}
