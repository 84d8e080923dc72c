//! Field masks on the JSON tree of a complete state: dotted paths
//! (`desiredState.workloads.nginx.agent`) as defined by [`crate::mask_path`]
//! (`*` selects any one non-empty key; a mask with an empty segment is
//! refused by [`validate`] and selects or changes nothing here).
//! [`filter`] keeps only the masked parts (for CompleteStateRequest);
//! [`read_masks`] names what a read mask makes the server return;
//! [`apply_update`] copies masked paths from a new state into the current
//! one, creating parents and deleting paths absent in the new state (for
//! UpdateStateRequest); [`check_update`] finds the first mask of an update
//! that Ankaios refuses because a path it needs does not exist.

use serde_json::{Map, Value};

use crate::mask_path::{MaskPath, MaskPathError, Segment};

/// Checks that every mask is a valid [`MaskPath`]; the error names the
/// first refused one.
pub fn validate<S: AsRef<str>>(masks: &[S]) -> Result<(), MaskPathError> {
    MaskPath::parse_all(masks).map(|_| ())
}

/// The paths the server reads for the read mask `mask`: the mask itself
/// and, for a mask into one execution state's field (5 segments under
/// `workloadStates`), the `state` and `subState` it comes with (one field
/// on the wire; Ankaios adds `state` to `subState` and back). Deeper masks
/// are not widened: they select nothing inside the state's strings.
pub fn read_masks(mask: &MaskPath) -> Vec<MaskPath> {
    let mut out = vec![mask.clone()];
    if let [Segment::Key(root), a, w, id, Segment::Key(field)] = mask.segments()
        && root == "workloadStates"
        && field != "additionalInfo"
    {
        let prefix =
            MaskPath::default().child(Segment::Key(root.clone())).child(a.clone()).child(w.clone()).child(id.clone());
        for companion in ["state", "subState"] {
            if field != companion {
                out.push(prefix.child(Segment::Key(companion.to_owned())));
            }
        }
    }
    out
}

fn parsed(masks: &[String]) -> impl Iterator<Item = MaskPath> + '_ {
    masks.iter().filter_map(|m| MaskPath::parse(m).ok())
}

/// Returns the parts of `value` selected by any of `masks`; an empty mask
/// list selects everything.
pub fn filter(value: &Value, masks: &[String]) -> Value {
    if masks.is_empty() {
        return value.clone();
    }
    let mut out = Value::Object(Map::new());
    for mask in parsed(masks) {
        if let Some(part) = extract(value, mask.segments()) {
            merge(&mut out, &part);
        }
    }
    out
}

/// The part of `src` under `path`, with its parents; `None` when the path
/// selects nothing (a parent on the way that is no map leaves no empty
/// map behind).
fn extract(src: &Value, path: &[Segment]) -> Option<Value> {
    let Some((head, rest)) = path.split_first() else { return Some(src.clone()) };
    let Value::Object(map) = src else { return None };
    let out: Map<String, Value> = map
        .iter()
        .filter(|(key, _)| head.selects(key))
        .filter_map(|(key, child)| extract(child, rest).map(|v| (key.clone(), v)))
        .collect();
    (!out.is_empty()).then_some(Value::Object(out))
}

fn merge(dst: &mut Value, src: &Value) {
    match (dst, src) {
        (Value::Object(d), Value::Object(s)) => {
            for (k, v) in s {
                merge(d.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (d, s) => *d = s.clone(),
    }
}

/// Looks up a path's keys (a `*` is the key `*`).
fn get<'a>(value: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    keys.iter().try_fold(value, |v, seg| v.get(seg))
}

/// Copies each masked path from `new` into `current`; a path missing in
/// `new` is removed from `current`. An empty mask list replaces everything;
/// a refused mask (see [`validate`]) changes nothing.
pub fn apply_update(current: &mut Value, new: &Value, masks: &[String]) {
    if masks.is_empty() {
        *current = new.clone();
        return;
    }
    for mask in parsed(masks) {
        let path = mask.literal_keys();
        match get(new, &path) {
            Some(v) => set(current, &path, v.clone()),
            None => remove(current, &path),
        }
    }
}

/// Plays an update's masks on a copy of `current` the way Ankaios does and
/// returns the first mask it cannot apply (`Could not find field <mask>`):
/// a path with a value in `new` needs every existing parent in `current`
/// to be a map (missing ones are created); a path without a value in `new`
/// is removed, which needs its parent to exist and be a map (a missing last
/// segment is fine). An empty mask can be neither set nor removed, nor can
/// a refused one (see [`validate`]).
pub fn check_update(current: &Value, new: &Value, masks: &[String]) -> Result<(), String> {
    let mut tree = current.clone();
    for mask in masks {
        let Ok(parsed) = MaskPath::parse(mask) else { return Err(mask.clone()) };
        let path = parsed.literal_keys();
        let Some((last, parents)) = path.split_last() else { return Err(mask.clone()) };
        let ok = match get_exact(new, &path) {
            Some(v) => try_set(&mut tree, parents, last, v.clone()),
            None => try_remove(&mut tree, parents, last),
        };
        if !ok {
            return Err(mask.clone());
        }
    }
    Ok(())
}

/// Looks up `path` segment by segment (list items by index).
fn get_exact<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, seg| match v {
        Value::Object(m) => m.get(*seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn try_set(target: &mut Value, parents: &[&str], last: &str, v: Value) -> bool {
    let mut node = target;
    for seg in parents {
        let Value::Object(m) = node else { return false };
        node = m.entry((*seg).to_owned()).or_insert_with(|| Value::Object(Map::new()));
    }
    let Value::Object(m) = node else { return false };
    m.insert(last.to_owned(), v);
    true
}

fn try_remove(target: &mut Value, parents: &[&str], last: &str) -> bool {
    let mut node = target;
    for seg in parents {
        match node {
            Value::Object(m) => match m.get_mut(*seg) {
                Some(n) => node = n,
                None => return false,
            },
            _ => return false,
        }
    }
    let Value::Object(m) = node else { return false };
    m.remove(last);
    true
}

fn set(target: &mut Value, path: &[&str], v: Value) {
    let Some((last, parents)) = path.split_last() else {
        *target = v;
        return;
    };
    let mut node = target;
    for seg in parents {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(m) = node else { return };
        node = m.entry((*seg).to_owned()).or_insert_with(|| Value::Object(Map::new()));
    }
    if !node.is_object() {
        *node = Value::Object(Map::new());
    }
    if let Value::Object(m) = node {
        m.insert((*last).to_owned(), v);
    }
}

fn remove(target: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = target;
    for seg in parents {
        match node.get_mut(*seg) {
            Some(n) => node = n,
            None => return,
        }
    }
    if let Value::Object(m) = node {
        m.remove(*last);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn field_mask_filter_with_wildcards() {
        let v = json!({"a": {"x": {"s": 1, "t": 2}, "y": {"s": 3}}, "b": 4});
        assert_eq!(filter(&v, &["a.*.s".into()]), json!({"a": {"x": {"s": 1}, "y": {"s": 3}}}));
        assert_eq!(filter(&v, &["b".into(), "a.y".into()]), json!({"a": {"y": {"s": 3}}, "b": 4}));
        assert_eq!(filter(&v, &["nope".into()]), json!({}));
        assert_eq!(filter(&v, &["a.x.s.deeper".into()]), json!({}), "no empty parents for a path into a value");
        assert_eq!(filter(&json!({"a": {"e": {}}}), &["a.e".into()]), json!({"a": {"e": {}}}));
        assert_eq!(filter(&v, &[]), v);
    }

    #[test]
    fn field_mask_check_update_names_the_first_path_ankaios_cannot_find() {
        let cur = json!({"desiredState": {"workloads": {"a": {"agent": "A", "tags": {}}}, "configs": {"c": "text"}}});
        let masks = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // Removing a missing workload or tag is fine: the parent exists.
        assert_eq!(
            check_update(&cur, &json!({}), &masks(&["desiredState.workloads.b", "desiredState.workloads.a.tags.x"])),
            Ok(())
        );
        // A workload name with a dot: its parent 'x' does not exist.
        assert_eq!(
            check_update(&cur, &json!({}), &masks(&["desiredState.workloads.x.y"])),
            Err("desiredState.workloads.x.y".into())
        );
        assert_eq!(
            check_update(&cur, &json!({}), &masks(&["desiredState.configs.missing.sub"])),
            Err("desiredState.configs.missing.sub".into())
        );
        // Setting creates missing parents but cannot go through a string.
        let new = json!({"desiredState": {"workloads": {"n": {"tags": {"k": "v"}}}, "configs": {"c": {"k": "v"}}}});
        assert_eq!(check_update(&cur, &new, &masks(&["desiredState.workloads.n.tags.k"])), Ok(()));
        assert_eq!(
            check_update(&cur, &new, &masks(&["desiredState.configs.c.k"])),
            Err("desiredState.configs.c.k".into())
        );
        // Masks apply in order: a parent set first can be removed from.
        assert_eq!(
            check_update(&cur, &new, &masks(&["desiredState.workloads.n", "desiredState.workloads.n.agent"])),
            Ok(())
        );
        assert_eq!(check_update(&cur, &new, &masks(&[""])), Err(String::new()));
    }

    #[test]
    fn field_mask_update_sets_creates_and_deletes() {
        let mut cur = json!({"d": {"w": {"a": {"k": 1}, "b": {"k": 2}}}});
        let new = json!({"d": {"w": {"c": {"k": 3}}}});
        apply_update(&mut cur, &new, &["d.w.c".into(), "d.w.a".into(), "x.y.z".into()]);
        assert_eq!(cur, json!({"d": {"w": {"b": {"k": 2}, "c": {"k": 3}}}}));
        let new = json!({"x": {"y": 5}});
        apply_update(&mut cur, &new, &["x.y".into()]);
        assert_eq!(cur["x"]["y"], 5);
    }

    #[test]
    fn field_mask_empty_segments_are_refused_and_change_nothing() {
        let masks = |m: &[&str]| m.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let state =
            json!({"desiredState": {"workloads": {"secret": {"agent": "A"}, "web": {"agent": "B", "tags": {}}}}});
        for bad in ["desiredState.workloads.", "desiredState.workloads..tags", ".desiredState", "a..b"] {
            assert_eq!(
                validate(&masks(&[bad])).unwrap_err().to_string(),
                format!(
                    "field mask '{bad}' has an empty segment: segments are separated by single dots and none may be empty"
                )
            );
            assert_eq!(check_update(&state, &json!({}), &masks(&[bad])), Err(bad.to_owned()));
        }
        // Before: the empty segment was dropped, so this replaced every workload.
        let mut cur = state.clone();
        apply_update(&mut cur, &json!({"desiredState": {"workloads": {}}}), &masks(&["desiredState.workloads."]));
        assert_eq!(cur, state);
        // Before: `..tags` became `.tags` of the workloads map itself.
        let new = json!({"desiredState": {"workloads": {"": {"tags": {}}, "tags": {"agent": "X"}}}});
        apply_update(&mut cur, &new, &masks(&["desiredState.workloads..tags"]));
        assert_eq!(cur, state);
        assert_eq!(filter(&state, &masks(&["desiredState.workloads."])), json!({}));
    }

    #[test]
    fn field_mask_wildcard_selects_exactly_one_non_empty_key() {
        let v = json!({"a": {"": {"s": 1}, "x": {"s": 2}}});
        assert_eq!(filter(&v, &["a.*.s".into()]), json!({"a": {"x": {"s": 2}}}));
        assert_eq!(filter(&v, &["a.*".into()]), json!({"a": {"x": {"s": 2}}}));
    }

    #[test]
    fn field_mask_read_masks_add_only_the_state_companion() {
        let read = |m: &str| read_masks(&MaskPath::parse(m).unwrap()).iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            read("workloadStates.A.w.id.state"),
            ["workloadStates.A.w.id.state", "workloadStates.A.w.id.subState"]
        );
        assert_eq!(
            read("workloadStates.*.w.id.subState"),
            ["workloadStates.*.w.id.subState", "workloadStates.*.w.id.state"]
        );
        assert_eq!(read("workloadStates.A.w.id.additionalInfo"), ["workloadStates.A.w.id.additionalInfo"]);
        assert_eq!(
            read("workloadStates.A.w.id.events"),
            ["workloadStates.A.w.id.events", "workloadStates.A.w.id.state", "workloadStates.A.w.id.subState"]
        );
        assert_eq!(read("workloadStates.A.w.id.state.x"), ["workloadStates.A.w.id.state.x"], "deeper: not widened");
        assert_eq!(read("workloadStates.A.w.id"), ["workloadStates.A.w.id"]);
        assert_eq!(read("desiredState.a.b.c.state"), ["desiredState.a.b.c.state"]);
    }
}
