//! Field masks on the JSON tree of a complete state: dotted paths
//! (`desiredState.workloads.nginx.agent`) with `*` matching any one segment.
//! [`filter`] keeps only the masked parts (for CompleteStateRequest);
//! [`apply_update`] copies masked paths from a new state into the current
//! one, creating parents and deleting paths absent in the new state (for
//! UpdateStateRequest); [`check_update`] finds the first mask of an update
//! that Ankaios refuses because a path it needs does not exist.

use serde_json::{Map, Value};

fn segments(mask: &str) -> Vec<&str> {
    mask.split('.').filter(|s| !s.is_empty()).collect()
}

/// Returns the parts of `value` selected by any of `masks`; an empty mask
/// list selects everything.
pub fn filter(value: &Value, masks: &[String]) -> Value {
    if masks.is_empty() {
        return value.clone();
    }
    let mut out = Value::Object(Map::new());
    for mask in masks {
        copy_matching(value, &mut out, &segments(mask));
    }
    out
}

fn copy_matching(src: &Value, dst: &mut Value, path: &[&str]) {
    let Some((head, rest)) = path.split_first() else {
        merge(dst, src);
        return;
    };
    let Value::Object(src_map) = src else { return };
    for (key, child) in src_map {
        if *head != "*" && head != key {
            continue;
        }
        if !dst.is_object() {
            *dst = Value::Object(Map::new());
        }
        let Value::Object(dst_map) = dst else { return };
        let slot = dst_map.entry(key.clone()).or_insert(Value::Null);
        copy_matching(child, slot, rest);
        if slot.is_null() {
            dst_map.remove(key);
        }
    }
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

/// Looks up a dotted path without wildcards.
pub fn get<'a>(value: &'a Value, mask: &str) -> Option<&'a Value> {
    segments(mask).into_iter().try_fold(value, |v, seg| v.get(seg))
}

/// Copies each masked path from `new` into `current`; a path missing in
/// `new` is removed from `current`. An empty mask list replaces everything.
pub fn apply_update(current: &mut Value, new: &Value, masks: &[String]) {
    if masks.is_empty() {
        *current = new.clone();
        return;
    }
    for mask in masks {
        let path = segments(mask);
        match get(new, mask) {
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
/// segment is fine). An empty mask can be neither set nor removed.
pub fn check_update(current: &Value, new: &Value, masks: &[String]) -> Result<(), String> {
    let mut tree = current.clone();
    for mask in masks {
        let path: Vec<&str> = if mask.is_empty() { Vec::new() } else { mask.split('.').collect() };
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

/// Looks up `path` segment by segment (list items by index), empty
/// segments included.
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
}
