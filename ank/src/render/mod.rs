//! Rendering of state trees as Ankaios' `ank` prints them: an ordered
//! [`Node`] tree ([`shape`] puts the keys of a complete state in Ankaios'
//! order and leaves out what Ankaios leaves out), written as YAML the way
//! serde_yaml/libyaml write it ([`yaml`]) or as JSON through serde_json.

pub mod shape;
pub mod yaml;

use serde::ser::{SerializeMap, SerializeSeq};
use serde_json::Value;

/// A YAML/JSON value whose maps keep the order they were built in.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The node of a JSON value, maps in the value's (sorted) key order.
    pub fn from_value(value: &Value) -> Self {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::String(s.clone()),
            Value::Array(items) => Node::Seq(items.iter().map(Node::from_value).collect()),
            Value::Object(map) => Node::Map(map.iter().map(|(k, v)| (k.clone(), Node::from_value(v))).collect()),
        }
    }
}

impl serde::Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => serializer.serialize_unit(),
            Node::Bool(b) => serializer.serialize_bool(*b),
            Node::Number(n) => n.serialize(serializer),
            Node::String(s) => serializer.serialize_str(s),
            Node::Seq(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Map(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// `node` as pretty JSON (serde_json's layout), without a final newline.
pub fn json_pretty(node: &Node) -> String {
    serde_json::to_string_pretty(node).unwrap_or_default()
}

/// `node` as one line of JSON.
pub fn json_line(node: &Node) -> String {
    serde_json::to_string(node).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_json_keeps_the_built_order() {
        let node = Node::Map(vec![
            ("b".into(), Node::Map(vec![])),
            ("a".into(), Node::Seq(vec![Node::Null, Node::Bool(true)])),
        ]);
        assert_eq!(json_line(&node), r#"{"b":{},"a":[null,true]}"#);
        assert_eq!(json_pretty(&node), "{\n  \"b\": {},\n  \"a\": [\n    null,\n    true\n  ]\n}");
    }
}
