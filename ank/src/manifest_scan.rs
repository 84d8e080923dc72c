//! One pass over a manifest's YAML for everything `ank apply` reads beside
//! the typed state: the JSON tree the schema check validates (read with
//! the manifest parser's YAML options), the names of its workloads in the
//! order the text has them (the typed state keeps them sorted) and its
//! `apiVersion`. The typed state itself is read by the manifest parser,
//! which names lines in its errors.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A manifest read as a JSON tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Scanned {
    /// The document as the schema check reads it.
    pub tree: Value,
    /// The keys of its `workloads` map in the order of the text.
    pub order: Vec<String>,
}

/// The manifest `text` read once; `None` when it is not YAML (the manifest
/// parser then names the line).
pub fn scan(text: &str) -> Option<Scanned> {
    serde_saphyr::with_deserializer_from_str_with_options(text, ank_common::manifest::yaml_options(), |de| {
        Tree { top: true }.deserialize(de)
    })
    .ok()
}

impl Scanned {
    /// The `apiVersion` as the manifest parser's probe reads it, when the
    /// tree says it for sure: `Some(None)` for a map without the key,
    /// `Some(Some(v))` for a string; `None` otherwise (the parser probes).
    pub fn api_version(&self) -> Option<Option<&str>> {
        let Value::Object(top) = &self.tree else { return None };
        match top.get("apiVersion") {
            None => Some(None),
            Some(Value::String(v)) => Some(Some(v)),
            Some(_) => None,
        }
    }

    /// The workloads that have neither an `agent` key (an empty value
    /// counts as one, as in Ankaios) nor our `agentSelector`.
    pub fn without_agent(&self) -> Vec<String> {
        let Some(workloads) = self.tree.get("workloads").and_then(Value::as_object) else { return Vec::new() };
        workloads
            .iter()
            .filter(|(_, w)| w.get("agent").is_none() && w.get("agentSelector").is_none())
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// Reads a value as [`Value`] does; the top map's `workloads` map also
/// records its keys in order.
struct Tree {
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Tree {
    type Value = Scanned;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Scanned, D::Error> {
        d.deserialize_any(self)
    }
}

fn leaf(tree: Value) -> Scanned {
    Scanned { tree, order: Vec::new() }
}

impl<'de> Visitor<'de> for Tree {
    type Value = Scanned;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scanned, E> {
        Ok(leaf(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scanned, E> {
        Ok(leaf(Value::Number(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scanned, E> {
        Ok(leaf(Value::Number(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scanned, E> {
        Ok(leaf(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Scanned, E> {
        Ok(leaf(Value::String(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Scanned, E> {
        Ok(leaf(Value::String(v)))
    }
    fn visit_none<E: de::Error>(self) -> Result<Scanned, E> {
        Ok(leaf(Value::Null))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Scanned, E> {
        Ok(leaf(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scanned, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Scanned, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scanned, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(leaf(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scanned, A::Error> {
        let mut out = Map::new();
        let mut order = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if self.top && key == "workloads" {
                let workloads = map.next_value_seed(Tree { top: false })?;
                order = workloads.order;
                workloads.tree
            } else {
                map.next_value::<Value>()?
            };
            if !self.top {
                order.push(key.clone());
            }
            out.insert(key, value);
        }
        Ok(Scanned { tree: Value::Object(out), order })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_reads_the_tree_as_a_plain_parse_does() {
        let texts = [
            "apiVersion: v1\nworkloads:\n  web:\n    agent: A\n    runtime: podman\n    runtimeConfig: |\n      image: x\n  \
             db: {agent: '', tags: {a: 1, b: yes, c: 1.5, d: ~, e: [1, -2, true]}}\nconfigs:\n  c: {k: [x, 'y']}\n",
            "apiVersion: v0.1\nworkloads:\n  w:\n    tags: [{key: a, value: b}]\n",
            "workloads:\n",
            "- a\n- b\n",
            "just text",
            "",
            "apiVersion: 1\nworkloads: [a]\n",
        ];
        for text in texts {
            let plain =
                serde_saphyr::from_str_with_options::<Value>(text, ank_common::manifest::yaml_options()).unwrap();
            assert_eq!(scan(text).unwrap().tree, plain, "{text}");
        }
        assert_eq!(scan("apiVersion: v1\nworkloads:\n  b: {}\n  a: {}\n  c: {}\n").unwrap().order, ["b", "a", "c"]);
        assert!(scan("a: [b\n").is_none());
    }
}
