//! `ank apply`'s type check of a manifest against the manifest JSON schema
//! (`schema/ank_schema.json`, embedded), as Eclipse Ankaios' `ank apply`
//! checks against its `ank_schema.json`: a value of the wrong type or an
//! unknown enum value is refused before anything is sent, each violation as
//! `'<JSON pointer>': <reason>` under `Manifest schema validation failed:`,
//! worded by the same validator (jsonschema, draft 7).
//!
//! A manifest that is not YAML is left to the manifest parser, which names
//! the line; a deprecated `v0.1` manifest is not checked, as in Ankaios (its
//! shape differs; the parser converts it).

use std::sync::OnceLock;

use ank_common::manifest::DEPRECATED_API_VERSION;
use serde_json::Value;

/// The committed schema, as shipped for editors.
pub const SCHEMA_TEXT: &str = include_str!("../../schema/ank_schema.json");

/// The violations of one manifest, in the validator's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Manifest schema validation failed:\n{}", .0.join("\n"))]
pub struct SchemaViolations(pub Vec<String>);

/// Why the embedded schema cannot be used (a broken build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the built-in manifest schema is unusable: {0}")]
pub struct BrokenSchema(String);

/// The validator of the embedded schema, built once.
fn validator() -> Result<&'static jsonschema::Validator, BrokenSchema> {
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, BrokenSchema>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| {
            let schema: Value = serde_json::from_str(SCHEMA_TEXT).map_err(|e| BrokenSchema(e.to_string()))?;
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft7)
                .build(&schema)
                .map_err(|e| BrokenSchema(e.to_string()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Checks the manifest `text` against the schema.
pub fn check(text: &str) -> anyhow::Result<()> {
    match crate::manifest_scan::scan(text) {
        Some(scanned) => check_tree(&scanned.tree),
        None => Ok(()),
    }
}

/// Checks the JSON tree of a manifest (see [`crate::manifest_scan`])
/// against the schema.
pub fn check_tree(instance: &Value) -> anyhow::Result<()> {
    if instance.get("apiVersion").and_then(Value::as_str) == Some(DEPRECATED_API_VERSION) {
        return Ok(());
    }
    let evaluation = validator()?.evaluate(instance);
    let violations: Vec<String> =
        evaluation.iter_errors().map(|e| format!("'{}': {}", e.instance_location, e.error)).collect();
    if violations.is_empty() { Ok(()) } else { Err(SchemaViolations(violations).into()) }
}
