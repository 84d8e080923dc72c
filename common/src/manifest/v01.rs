//! Reading manifests of the deprecated `apiVersion: v0.1`: the differences
//! to `v1` (tags as a list of `{key, value}`, `filterMask` for
//! `filterMasks`) are converted, and the result is a `v1` [`State`].

use serde_json::Value;

use crate::API_VERSION;
use crate::complete_state::State;

/// Why a `v0.1` manifest cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum V01Error {
    /// No YAML: the first line of the parser's error, with its position.
    #[error("{0}")]
    Yaml(String),
    #[error("workload '{workload}': field 'tags': each v0.1 tag needs a string 'key' and 'value', got {tag}")]
    Tag { workload: String, tag: Value },
    #[error("invalid v0.1 manifest: {0}")]
    Invalid(serde_json::Error),
}

/// Parses a `v0.1` manifest text into a `v1` state.
pub fn parse(text: &str) -> Result<State, V01Error> {
    let mut tree: Value = serde_saphyr::from_str_with_options(text, crate::manifest::yaml_options())
        .map_err(|e| V01Error::Yaml(crate::manifest::describe(&e)))?;
    tree["apiVersion"] = Value::String(API_VERSION.to_owned());
    if let Some(workloads) = tree.get_mut("workloads").and_then(Value::as_object_mut) {
        for (name, wl) in workloads.iter_mut() {
            if let Some(tags) = wl.get_mut("tags") {
                *tags = tags_as_map(tags).map_err(|tag| V01Error::Tag { workload: name.clone(), tag })?;
            }
        }
    }
    serde_json::from_value(tree).map_err(V01Error::Invalid)
}

/// `[{key: k, value: v}, ...]` -> `{k: v, ...}`; a map stays as it is.
/// The error is the first tag that is no such pair.
fn tags_as_map(tags: &Value) -> Result<Value, Value> {
    let Some(list) = tags.as_array() else { return Ok(tags.clone()) };
    let mut map = serde_json::Map::new();
    for tag in list {
        let (Some(key), Some(value)) =
            (tag.get("key").and_then(Value::as_str), tag.get("value").and_then(Value::as_str))
        else {
            return Err(tag.clone());
        };
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    Ok(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use crate::manifest::parse_manifest_with_warnings;

    const V01: &str = "apiVersion: v0.1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    tags:\n      - key: owner\n        value: me\n    controlInterfaceAccess:\n      allowRules:\n        - type: StateRule\n          operation: Read\n          filterMask: [\"desiredState\"]\n    runtimeConfig: |\n      image: busybox\n";

    #[test]
    fn v01_manifest_is_read_as_v1_with_a_warning() {
        let (state, warnings) = parse_manifest_with_warnings("old.yaml", V01).unwrap();
        assert_eq!(state.api_version, "v1");
        assert_eq!(state.workloads["nginx"].tags["owner"], "me");
        assert_eq!(state.workloads["nginx"].control_interface_access.allow_rules.len(), 1);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("old.yaml: apiVersion 'v0.1' is deprecated"), "{}", warnings[0]);
    }

    #[test]
    fn v01_manifest_reads_yes_as_a_string() {
        let (state, _) = parse_manifest_with_warnings("old.yaml", &V01.replace("value: me", "value: yes")).unwrap();
        assert_eq!(state.workloads["nginx"].tags["owner"], "yes");
    }

    #[test]
    fn v01_manifest_with_a_broken_tag_names_it() {
        let text = V01.replace("        value: me\n", "");
        let e = parse_manifest_with_warnings("old.yaml", &text).unwrap_err().to_string();
        assert!(e.contains("workload 'nginx': field 'tags'") && e.contains("owner"), "{e}");
    }
}
