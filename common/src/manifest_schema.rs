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
