//! The complete state in the shape Ankaios' `ank` prints: the keys of each
//! object in the order of Ankaios' protobuf messages, the empty parts
//! Ankaios leaves out left out (`configs`, `tags`, `dependencies`, ...),
//! `additionalInfo` in every workload state. Our extensions follow
//! Ankaios' keys; those the server computes (jobs, the agents'
//! capabilities, metrics and quota, conditions and generations of
//! instances, effective priorities) only when asked for: by a field mask
//! that names them or by `--extensions`.

use serde_json::Value;

use super::Node;

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct ShapeOptions {
    /// The field masks of the request.
    pub masks: Vec<String>,
    /// Show the fields the server adds beyond Ankaios'.
    pub extensions: bool,
}

impl ShapeOptions {
    /// Whether the hidden extension field at `path` is shown: with
    /// `--extensions`, or when a mask names it (a `*` may stand for the
    /// parents, not for the field itself).
    fn shows(&self, path: &[&str]) -> bool {
        self.extensions
            || self.masks.iter().any(|mask| {
                let segs: Vec<&str> = mask.split('.').collect();
                segs.len() >= path.len()
                    && path.iter().enumerate().all(|(i, p)| segs[i] == *p || (segs[i] == "*" && i + 1 < path.len()))
            })
    }
}

/// How one kind of object is printed.
struct Kind {
    /// Ankaios' keys in Ankaios' order.
    order: &'static [&'static str],
    /// Keys left out when their value is empty.
    omit_empty: &'static [&'static str],
    /// Extension keys shown only when asked for.
    hidden: &'static [&'static str],
}

const TOP: Kind =
    Kind { order: &["desiredState", "workloadStates", "agents", "effectiveState"], omit_empty: &[], hidden: &["jobs"] };
const STATE: Kind = Kind { order: &["apiVersion", "workloads", "configs"], omit_empty: &["configs"], hidden: &[] };
const WORKLOAD: Kind = Kind {
    order: &[
        "agent",
        "restartPolicy",
        "dependencies",
        "tags",
        "runtime",
        "runtimeConfig",
        "controlInterfaceAccess",
        "configs",
        "files",
    ],
    omit_empty: &["dependencies", "tags", "controlInterfaceAccess", "configs", "files"],
    hidden: &["effectivePriority"],
};
const ACCESS: Kind =
    Kind { order: &["allowRules", "denyRules"], omit_empty: &["allowRules", "denyRules"], hidden: &[] };
/// A rule of `allowRules` / `denyRules`: its `type` first, then the
/// fields of Ankaios' StateRule or LogRule in their order.
const RULE: Kind = Kind { order: &["type", "operation", "filterMasks", "workloadNames"], omit_empty: &[], hidden: &[] };
const EXECUTION_STATE: Kind = Kind {
    order: &["additionalInfo", "state", "subState"],
    omit_empty: &[],
    hidden: &["generation", "observedGeneration", "conditions", "resyncs", "events", "reverted"],
};
const AGENT: Kind = Kind {
    order: &["status", "tags"],
    omit_empty: &["tags"],
    hidden: &["droppedStaleReports", "capabilities", "metrics", "quota", "notReported"],
};
const AGENT_STATUS: Kind = Kind { order: &["cpuUsage", "freeMemory"], omit_empty: &[], hidden: &[] };

/// The printable tree of a complete state (as the server sent it).
pub fn complete_state(tree: &Value, opts: &ShapeOptions) -> Node {
    object(tree, &TOP, &[], opts, &|key, value, path| match key {
        "desiredState" | "effectiveState" => Some(state(value, path, opts)),
        "workloadStates" => Some(workload_states(value, path, opts)),
        "agents" => Some(each(value, |agent, p| agent_attributes(agent, p, opts), path)),
        _ => None,
    })
}

fn state(value: &Value, path: &[&str], opts: &ShapeOptions) -> Node {
    object(value, &STATE, path, opts, &|key, v, p| match key {
        "workloads" => Some(each(v, |w, p| workload(w, p, opts), p)),
        _ => None,
    })
}

fn workload(value: &Value, path: &[&str], opts: &ShapeOptions) -> Node {
    object(value, &WORKLOAD, path, opts, &|key, v, p| match key {
        "controlInterfaceAccess" => {
            Some(object(v, &ACCESS, p, opts, &|_, rules, p| Some(access_rules(rules, p, opts))))
        }
        _ => None,
    })
}

/// A list of access rules, each in Ankaios' key order.
fn access_rules(value: &Value, path: &[&str], opts: &ShapeOptions) -> Node {
    let Value::Array(rules) = value else { return Node::from_value(value) };
    Node::Seq(rules.iter().map(|rule| object(rule, &RULE, path, opts, &|_, _, _| None)).collect())
}

/// agent -> workload -> id -> execution state.
fn workload_states(value: &Value, path: &[&str], opts: &ShapeOptions) -> Node {
    // A mask below an instance selects single fields of it.
    let masked_fields = opts.masks.iter().any(|m| m.starts_with("workloadStates.") && m.split('.').count() > 4);
    each(
        value,
        |by_name, p| {
            each(
                by_name,
                |by_id, p| {
                    each(
                        by_id,
                        |entry, p| {
                            let mut entry = entry.clone();
                            if let Value::Object(fields) = &mut entry
                                && !masked_fields
                                && fields.contains_key("state")
                            {
                                // Ankaios' server always sends it, empty or not.
                                fields.entry("additionalInfo").or_insert_with(|| Value::String(String::new()));
                            }
                            object(&entry, &EXECUTION_STATE, p, opts, &|_, _, _| None)
                        },
                        p,
                    )
                },
                p,
            )
        },
        path,
    )
}

fn agent_attributes(value: &Value, path: &[&str], opts: &ShapeOptions) -> Node {
    object(value, &AGENT, path, opts, &|key, v, p| match key {
        "status" => Some(object(v, &AGENT_STATUS, p, opts, &|_, _, _| None)),
        _ => None,
    })
}

/// A map of named entries, each shaped by `entry`.
fn each(value: &Value, entry: impl Fn(&Value, &[&str]) -> Node, path: &[&str]) -> Node {
    let Value::Object(map) = value else { return Node::from_value(value) };
    Node::Map(
        map.iter()
            .map(|(name, v)| {
                let mut p = path.to_vec();
                p.push(name);
                (name.clone(), entry(v, &p))
            })
            .collect(),
    )
}

/// Shapes one value of an object (key, value, its path); `None` keeps it as it is.
type Child<'a> = dyn Fn(&str, &Value, &[&str]) -> Option<Node> + 'a;

/// An object of `kind`: Ankaios' keys first in its order, then the other
/// keys (sorted); `child` shapes a value, `None` keeps it as it is.
fn object(value: &Value, kind: &Kind, path: &[&str], opts: &ShapeOptions, child: &Child) -> Node {
    let Value::Object(map) = value else { return Node::from_value(value) };
    let others = map.keys().map(String::as_str).filter(|k| !kind.order.contains(k));
    let keys: Vec<&str> = kind.order.iter().copied().filter(|k| map.contains_key(*k)).chain(others).collect();
    let mut out = Vec::new();
    for key in keys {
        let v = &map[key];
        let mut p = path.to_vec();
        p.push(key);
        if kind.omit_empty.contains(&key) && is_empty(v) {
            continue;
        }
        if kind.hidden.contains(&key) && !opts.shows(&p) {
            continue;
        }
        out.push((key.to_owned(), child(key, v, &p).unwrap_or_else(|| Node::from_value(v))));
    }
    Node::Map(out)
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty() || m.values().all(is_empty_rules),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// An access object whose rule lists are all empty counts as empty.
fn is_empty_rules(v: &Value) -> bool {
    matches!(v, Value::Array(a) if a.is_empty())
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod tests;
