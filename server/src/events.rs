//! Event subscriptions (CompleteStateRequest with `subscribeForEvents`):
//! who subscribed with which field masks, the comparison of two complete
//! states into altered fields (added and removed at the first level that
//! differs, updated at the leaves, lists are leaves) and the event each
//! subscriber gets: only the paths its masks select, with their new values.

use std::collections::BTreeMap;

use ank_common::field_mask;
use ank_common::messages::AlteredFields;
use serde_json::Value;

use crate::connections::ConnId;

/// One event for one subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub conn: ConnId,
    pub request_id: String,
    pub complete_state: Value,
    pub altered_fields: AlteredFields,
}

/// The open subscriptions: (connection, request id) -> field masks.
#[derive(Debug, Default)]
pub struct EventSubscriptions {
    subs: BTreeMap<(ConnId, String), Vec<String>>,
}

impl EventSubscriptions {
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Opens (or with the same id replaces) a subscription.
    pub fn add(&mut self, conn: ConnId, request_id: String, masks: Vec<String>) {
        self.subs.insert((conn, request_id), masks);
    }

    /// Ends one subscription; false if there was none.
    pub fn remove(&mut self, conn: ConnId, request_id: &str) -> bool {
        self.subs.remove(&(conn, request_id.to_owned())).is_some()
    }

    /// Ends the subscriptions of one connection whose request ids `drop`
    /// selects (`|_| true` for a closed connection).
    pub fn remove_where(&mut self, conn: ConnId, mut drop: impl FnMut(&str) -> bool) {
        self.subs.retain(|(c, id), _| *c != conn || !drop(id));
    }

    /// The events that the change from `old` to `new` gives each subscriber.
    pub fn events(&self, old: &Value, new: &Value) -> Vec<Event> {
        let altered = altered_fields(old, new);
        if altered.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for ((conn, request_id), masks) in &self.subs {
            let mine = select(&altered, old, new, masks);
            if mine.is_empty() {
                continue;
            }
            // As in every answer, the desired state's apiVersion comes along.
            let selected: Vec<String> = mine
                .added_fields
                .iter()
                .chain(&mine.updated_fields)
                .cloned()
                .chain(std::iter::once("desiredState.apiVersion".to_owned()))
                .collect();
            let complete_state = field_mask::filter(new, &selected);
            out.push(Event { conn: *conn, request_id: request_id.clone(), complete_state, altered_fields: mine });
        }
        out
    }
}

/// What differs between two trees.
pub fn altered_fields(old: &Value, new: &Value) -> AlteredFields {
    let mut out = AlteredFields::default();
    compare(old, new, &mut Vec::new(), &mut out);
    out
}

/// An execution state (`workloadStates.<agent>.<workload>.<id>`) is one
/// leaf: state, subState and additionalInfo only make sense together.
fn is_leaf(path: &[&str]) -> bool {
    path.len() == 4 && path[0] == "workloadStates"
}

fn compare<'a>(old: &'a Value, new: &'a Value, path: &mut Vec<&'a str>, out: &mut AlteredFields) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if !is_leaf(path) => {
            for (key, old_child) in o {
                path.push(key);
                match n.get(key) {
                    Some(new_child) => compare(old_child, new_child, path, out),
                    None => out.removed_fields.push(path.join(".")),
                }
                path.pop();
            }
            for key in n.keys().filter(|k| !o.contains_key(*k)) {
                path.push(key);
                out.added_fields.push(path.join("."));
                path.pop();
            }
        }
        (o, n) if o != n => out.updated_fields.push(path.join(".")),
        _ => {}
    }
}

/// The altered fields a subscriber's masks select. A change above a mask
/// (a workload added while the mask names one of its fields) is reported as
/// the concrete paths of the mask inside it.
fn select(altered: &AlteredFields, old: &Value, new: &Value, masks: &[String]) -> AlteredFields {
    if masks.is_empty() {
        return altered.clone();
    }
    AlteredFields {
        added_fields: select_paths(&altered.added_fields, new, masks),
        updated_fields: select_paths(&altered.updated_fields, new, masks),
        removed_fields: select_paths(&altered.removed_fields, old, masks),
    }
}

fn select_paths(paths: &[String], tree: &Value, masks: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for path in paths {
        let p: Vec<&str> = path.split('.').collect();
        for mask in masks {
            let m: Vec<&str> = mask.split('.').filter(|s| !s.is_empty()).collect();
            if prefix_matches(&m, &p) {
                out.push(path.clone());
            } else if prefix_matches(&p, &m) {
                out.extend(expand(tree, &m).into_iter().filter(|c| c.starts_with(&format!("{path}."))));
            }
        }
    }
    for path in &mut out {
        widen_to_leaf(path);
    }
    out.sort();
    out.dedup();
    out
}

/// A path inside an execution state stands for the whole state.
fn widen_to_leaf(path: &mut String) {
    let segs: Vec<&str> = path.split('.').collect();
    if segs.len() > 4 && segs[0] == "workloadStates" {
        *path = segs[..4].join(".");
    }
}

/// Whether `prefix` (which may hold `*`) matches the first segments of `path`.
fn prefix_matches(prefix: &[&str], path: &[&str]) -> bool {
    prefix.len() <= path.len() && prefix.iter().zip(path).all(|(a, b)| *a == "*" || *b == "*" || a == b)
}

/// The concrete paths in `tree` that `mask` selects.
fn expand(tree: &Value, mask: &[&str]) -> Vec<String> {
    fn walk(node: &Value, mask: &[&str], path: &mut Vec<String>, out: &mut Vec<String>) {
        let Some((head, rest)) = mask.split_first() else {
            out.push(path.join("."));
            return;
        };
        let Value::Object(map) = node else { return };
        for (key, child) in map {
            if *head == "*" || head == key {
                path.push(key.clone());
                walk(child, rest, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, mask, &mut Vec::new(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn old() -> Value {
        json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "A", "tags": {"x": "1"}, "files": [1]}}},
            "workloadStates": {"A": {"a": {"id1": {"state": "Pending", "subState": "Initial"}}}}
        })
    }

    fn new() -> Value {
        json!({
            "desiredState": {"apiVersion": "v1", "workloads": {
                "a": {"agent": "A", "tags": {"y": "2"}, "files": [1, 2]},
                "b": {"agent": "B"}
            }},
            "workloadStates": {"A": {"a": {"id1": {"state": "Running", "subState": "Ok"}}}}
        })
    }

    #[test]
    fn altered_fields_add_and_remove_at_first_level_update_leaves() {
        let a = altered_fields(&old(), &new());
        assert_eq!(a.added_fields, ["desiredState.workloads.a.tags.y", "desiredState.workloads.b"]);
        assert_eq!(a.updated_fields, ["desiredState.workloads.a.files", "workloadStates.A.a.id1"]);
        assert_eq!(a.removed_fields, ["desiredState.workloads.a.tags.x"]);
        assert!(altered_fields(&new(), &new()).is_empty());
    }

    #[test]
    fn subscribers_get_only_what_their_masks_select() {
        let mut subs = EventSubscriptions::default();
        subs.add(1, "all".into(), vec![]);
        subs.add(2, "states".into(), vec!["workloadStates.*.a".into()]);
        subs.add(3, "agents-of-new".into(), vec!["desiredState.workloads.*.agent".into()]);
        subs.add(4, "quiet".into(), vec!["configs".into()]);
        let events = subs.events(&old(), &new());
        let by_id = |id: &str| events.iter().find(|e| e.request_id == id).cloned();
        assert_eq!(by_id("all").unwrap().altered_fields, altered_fields(&old(), &new()));
        let states = by_id("states").unwrap();
        assert_eq!(states.altered_fields.updated_fields, ["workloadStates.A.a.id1"]);
        assert!(states.altered_fields.added_fields.is_empty());
        assert_eq!(
            states.complete_state,
            json!({"desiredState": {"apiVersion": "v1"}, "workloadStates": {"A": {"a": {"id1": {"state": "Running", "subState": "Ok"}}}}})
        );
        // "b" was added above the mask's level: reported as its agent field.
        let agents = by_id("agents-of-new").unwrap();
        assert_eq!(agents.altered_fields.added_fields, ["desiredState.workloads.b.agent"]);
        assert_eq!(
            agents.complete_state,
            json!({"desiredState": {"apiVersion": "v1", "workloads": {"b": {"agent": "B"}}}})
        );
        assert!(by_id("quiet").is_none(), "nothing under its mask changed");
        // A mask inside an execution state gets the whole state.
        subs.add(5, "sub-state".into(), vec!["workloadStates.A.a.id1.subState".into()]);
        let events = subs.events(&old(), &new());
        let e = events.iter().find(|e| e.request_id == "sub-state").unwrap();
        assert_eq!(e.altered_fields.updated_fields, ["workloadStates.A.a.id1"]);
    }

    #[test]
    fn subscriptions_end_by_id_or_by_connection() {
        let mut subs = EventSubscriptions::default();
        subs.add(1, "r1".into(), vec![]);
        subs.add(1, "wl@r2".into(), vec![]);
        subs.add(2, "r3".into(), vec![]);
        assert!(subs.remove(1, "r1"));
        assert!(!subs.remove(1, "r1"));
        subs.remove_where(1, |id| id.starts_with("wl@"));
        subs.remove_where(2, |_| true);
        assert!(subs.is_empty());
    }
}
