//! The pieces of the manifest schema the desired-state types name in
//! their `schemars` attributes: the patterns of names, agents, field masks
//! and log rules, and the schemas of name-keyed maps. A leaf module, so the
//! types can use it without depending on the schema of the whole manifest
//! (`manifest_schema`).

use serde_json::Value;

/// The characters of a workload name, a config key or alias, and of each
/// part of a field mask: the same set as Ankaios.
pub(crate) const NAME_CHARS: &str = "[a-zA-Z0-9_-]";

/// The longest workload name, config key or alias.
pub(crate) const MAX_NAME_LENGTH: u64 = 63;

/// The constraint on a name used as a map key (or a value naming a key).
pub(crate) fn name_schema(what: &str) -> Value {
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
