//! The altered fields of an event, computed as Ankaios computes them.
//!
//! [`comparable`] reduces a complete-state tree to the fields Ankaios has,
//! in the shape its serialization gives them: empty dependency, tag and
//! config maps, empty file lists and empty access rules are absent, an
//! execution state always has `additionalInfo`, an agent has `tags` only if
//! it has any and `status` only once reported. This project's extensions
//! (the jobs, the fields beside an execution state, an agent's metrics,
//! quota and capabilities) are compared too, but reported only to
//! subscribers whose masks name them. [`differences`]
//! compares two such trees into difference trees: for added and removed
//! fields the path to the first differing key (`first`) and the whole
//! added or removed subtree (`full`); for updated fields the changed
//! leaves, a list counting as one leaf. [`Differences::altered_fields`]
//! then selects what a subscriber's field masks name: without masks the
//! first differences, with masks the fields at the mask's depth, reaching
//! into added and removed subtrees where the mask goes deeper.

use ank_common::mask_path::{MaskPath, Segment};
use ank_common::messages::AlteredFields;
use serde_json::{Map, Value};

/// The top-level fields that are this project's extensions: reported only
/// to subscribers whose masks name them.
const EXTENSION_ROOTS: &[&str] = &["jobs"];

/// `tree` reduced to the fields Ankaios compares; `status_reported` says
/// whether an agent has reported its load yet.
pub fn comparable(tree: &Value, status_reported: impl Fn(&str) -> bool) -> Value {
    let Value::Object(root) = tree else { return Value::Object(Map::new()) };
    let mut out = Map::new();
    for (key, value) in root {
        let reduced = match key.as_str() {
            "desiredState" | "effectiveState" => desired_state(value),
            "workloadStates" => workload_states(value),
            "agents" => agents(value, &status_reported),
            _ => value.clone(),
        };
        out.insert(key.clone(), reduced);
    }
    Value::Object(out)
}

fn desired_state(value: &Value) -> Value {
    let mut state = value.clone();
    let Some(map) = state.as_object_mut() else { return state };
    drop_if_empty(map, "configs");
    if let Some(Value::Object(workloads)) = map.get_mut("workloads") {
        for workload in workloads.values_mut().filter_map(Value::as_object_mut) {
            for key in ["dependencies", "tags", "configs", "files"] {
                drop_if_empty(workload, key);
            }
            let no_rules = workload
                .get("controlInterfaceAccess")
                .is_some_and(|access| ["allowRules", "denyRules"].iter().all(|k| access.get(*k).is_none_or(is_empty)));
            if no_rules {
                workload.remove("controlInterfaceAccess");
            }
        }
    }
    state
}

fn workload_states(value: &Value) -> Value {
    map_leaves(value, 3, |entry| {
        let mut out = entry.as_object().cloned().unwrap_or_default();
        out.entry("additionalInfo").or_insert_with(|| "".into());
        Value::Object(out)
    })
}

fn agents(value: &Value, status_reported: &impl Fn(&str) -> bool) -> Value {
    let Value::Object(agents) = value else { return value.clone() };
    let mut out = Map::new();
    for (name, attributes) in agents {
        let mut reduced = attributes.as_object().cloned().unwrap_or_default();
        drop_if_empty(&mut reduced, "tags");
        if !status_reported(name) {
            reduced.remove("status");
        }
        out.insert(name.clone(), Value::Object(reduced));
    }
    Value::Object(out)
}

/// Where `path` names one of this project's extensions: the index of the
/// segment that is not Ankaios' (a top-level extension, a field beside an
/// execution state, an agent field besides its status and tags).
fn extension_at(path: &[&str]) -> Option<usize> {
    match path {
        [root, ..] if EXTENSION_ROOTS.contains(root) => Some(0),
        ["workloadStates", _, _, _, field, ..] if !["state", "subState", "additionalInfo"].contains(field) => Some(4),
        ["agents", _, field, ..] if !["status", "tags"].contains(field) => Some(2),
        _ => None,
    }
}

/// Whether `path` is reported to a subscriber with `mask`: Ankaios' fields
/// always, an extension only where the mask names it.
fn reported_to(path: &str, mask: Option<&[Segment]>) -> bool {
    let segs: Vec<&str> = path.split('.').collect();
    match extension_at(&segs) {
        None => true,
        Some(i) => mask.and_then(|m| m.get(i)).is_some_and(|m| matches!(m, Segment::Key(k) if k == segs[i])),
    }
}

/// Applies `f` to the values `depth` map levels below `value`.
fn map_leaves(value: &Value, depth: usize, f: impl Fn(&Value) -> Value + Copy) -> Value {
    match value {
        _ if depth == 0 => f(value),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), map_leaves(v, depth - 1, f))).collect())
        }
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

fn drop_if_empty(map: &mut Map<String, Value>, key: &str) {
    if map.get(key).is_some_and(is_empty) {
        map.remove(key);
    }
}

/// The difference trees of two comparable trees: maps whose leaves (null)
/// are the differing paths.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Differences {
    added_first: Map<String, Value>,
    added_full: Map<String, Value>,
    removed_first: Map<String, Value>,
    removed_full: Map<String, Value>,
    updated: Map<String, Value>,
}

/// Compares `old` with `new`.
pub fn differences(old: &Value, new: &Value) -> Differences {
    let mut d = Differences::default();
    if let (Value::Object(o), Value::Object(n)) = (old, new) {
        compare(o, n, &mut Vec::new(), &mut d);
    }
    d
}

fn compare(old: &Map<String, Value>, new: &Map<String, Value>, path: &mut Vec<String>, d: &mut Differences) {
    for (key, value) in new.iter().filter(|(k, _)| !old.contains_key(*k)) {
        let at = with(path, key);
        insert(&mut d.added_first, &at, Value::Null);
        insert(&mut d.added_full, &at, skeleton(value));
    }
    for (key, old_value) in old {
        let at = with(path, key);
        let Some(new_value) = new.get(key) else {
            insert(&mut d.removed_first, &at, Value::Null);
            insert(&mut d.removed_full, &at, skeleton(old_value));
            continue;
        };
        match (old_value, new_value) {
            (Value::Object(o), Value::Object(n)) => {
                path.push(key.clone());
                compare(o, n, path, d);
                path.pop();
            }
            (Value::Array(o), Value::Array(n)) if o.is_empty() && !n.is_empty() => {
                insert(&mut d.added_first, &at, Value::Null)
            }
            (Value::Array(o), Value::Array(n)) if !o.is_empty() && n.is_empty() => {
                insert(&mut d.removed_first, &at, Value::Null)
            }
            (o, n) if o != n => insert(&mut d.updated, &at, Value::Null),
            _ => {}
        }
    }
}

fn with(path: &[String], key: &str) -> Vec<String> {
    let mut at = path.to_vec();
    at.push(key.to_owned());
    at
}

/// The keys of `value` down to its leaves, without data.
fn skeleton(value: &Value) -> Value {
    match value {
        Value::Object(map) if !map.is_empty() => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), skeleton(v))).collect())
        }
        _ => Value::Null,
    }
}

fn insert(tree: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = tree;
    for seg in parents {
        let slot = node.entry(seg.clone()).or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(next) = slot else { return };
        node = next;
    }
    node.insert(last.clone(), value);
}

impl Differences {
    pub fn is_empty(&self) -> bool {
        self.added_first.is_empty() && self.removed_first.is_empty() && self.updated.is_empty()
    }

    /// The altered fields a subscriber with `masks` is told about.
    pub fn altered_fields(&self, masks: &[String]) -> AlteredFields {
        AlteredFields {
            added_fields: select(&self.added_first, &self.added_full, masks),
            updated_fields: select(&self.updated, &self.updated, masks),
            removed_fields: select(&self.removed_first, &self.removed_full, masks),
        }
    }
}

/// The paths of `first` (with `full` reaching below it) that `masks` name.
fn select(first: &Map<String, Value>, full: &Map<String, Value>, masks: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if masks.is_empty() {
        for (key, child) in first {
            leaves(child, key.clone(), &mut out);
        }
        out.retain(|p| reported_to(p, None));
        return out;
    }
    for mask in masks {
        // Subscription masks are checked when the subscription is made; one
        // that does not parse here selects nothing.
        let Ok(mask) = MaskPath::parse(mask) else { continue };
        let parts = mask.segments();
        let mut found = Vec::new();
        walk(Some(first), full, parts, String::new(), &mut found);
        out.extend(found.into_iter().filter(|p| reported_to(p, Some(parts))));
    }
    out
}

/// Every leaf path below `node` (itself if it is a leaf).
fn leaves(node: &Value, path: String, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (key, child) in map {
                leaves(child, join(&path, key), out);
            }
        }
        _ => out.push(path),
    }
}

fn join(path: &str, key: &str) -> String {
    match (path.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (_, true) => path.to_owned(),
        _ => format!("{path}.{key}"),
    }
}

/// Follows `parts` through the first-difference tree (`None` below its
/// leaves) and the full one. At the mask's end, the first differences
/// below are reported; below a first difference, only what the mask names
/// down to a leaf of the full tree (a wildcard at the end names every key).
fn walk(
    first: Option<&Map<String, Value>>,
    full: &Map<String, Value>,
    parts: &[Segment],
    path: String,
    out: &mut Vec<String>,
) {
    let Some((head, rest)) = parts.split_first() else {
        if let Some(first) = first {
            for (key, child) in first {
                leaves(child, join(&path, key), out);
            }
        }
        return;
    };
    let step = |key: &str, first_child: Option<&Value>, full_child: &Value, out: &mut Vec<String>| {
        let at = join(&path, key);
        match (first_child.unwrap_or(&Value::Null), full_child) {
            (Value::Object(f), Value::Object(x)) => walk(Some(f), x, rest, at, out),
            (Value::Null, _) if rest.is_empty() => out.push(at),
            (Value::Null, Value::Object(x)) => walk(None, x, rest, at, out),
            _ => {}
        }
    };
    let head = match head {
        Segment::Any => {
            for (key, full_child) in full.iter().filter(|(key, _)| head.selects(key)) {
                step(key, first.and_then(|f| f.get(key)), full_child, out);
            }
            return;
        }
        Segment::Key(key) => key.as_str(),
    };
    let Some(full_child) = full.get(head) else { return };
    match first.and_then(|f| f.get(head)) {
        Some(first_child) => step(head, Some(first_child), full_child, out),
        // Below the first difference: a map named at the mask's end has no
        // first differences below it, so it reports nothing.
        None => match full_child {
            Value::Object(x) => walk(None, x, rest, join(&path, head), out),
            Value::Null if rest.is_empty() => out.push(join(&path, head)),
            _ => {}
        },
    }
}

#[cfg(test)]
#[path = "state_diff_tests.rs"]
mod tests;
