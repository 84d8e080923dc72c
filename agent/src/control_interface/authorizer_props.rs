//! Property test of the mask path shared by the authorizer and the server:
//! for generated states, access rules and masks (empty segments and `*`
//! included), whatever the [`Authorizer`] lets through, the server's field
//! masks ([`field_mask`], what ank-server runs) read or write only paths
//! that an allow rule covers and no deny rule names; and a mask is refused
//! by the authorizer for its shape exactly when the server refuses it.

use ank_common::field_mask;
use ank_common::mask_path::MaskPath;
use ank_common::messages::RequestContent;
use ank_common::workload::{AccessRule, ControlInterfaceAccess, ReadWrite};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use super::authorizer::Authorizer;

/// The keys of the generated states, by depth: two roots, two names at each
/// of the three levels below (agent, workload, id for the workload states)
/// and an execution state's fields.
fn keys(depth: usize) -> Vec<&'static str> {
    match depth {
        0 => vec!["desiredState", "workloadStates"],
        1..=3 => vec!["a", "b"],
        4 => vec!["state", "subState", "additionalInfo"],
        _ => vec!["x"],
    }
}

/// A concrete path of 1 to 5 keys.
fn key_path() -> impl Strategy<Value = Vec<String>> {
    (1usize..=5).prop_flat_map(|n| (0..n).map(|d| select(keys(d)).prop_map(str::to_owned)).collect::<Vec<_>>())
}

/// A state: up to 12 leaves (later ones replace what lies in their way).
fn state() -> impl Strategy<Value = Value> {
    prop::collection::vec((key_path(), 0u8..4), 0..12).prop_map(|leaves| {
        let mut tree = Value::Object(Map::new());
        for (path, v) in leaves {
            set(&mut tree, &path, Value::from(v));
        }
        tree
    })
}

fn set(tree: &mut Value, path: &[String], v: Value) {
    let mut node = tree;
    for key in path {
        if !node.is_object() {
            *node = Value::Object(Map::new());
        }
        let Value::Object(m) = node else { unreachable!("made an object above") };
        node = m.entry(key.clone()).or_insert(Value::Null);
    }
    *node = v;
}

/// A segment of a mask or rule at `depth`: a key, `*` or (masks only) empty.
fn segment(depth: usize, empty: bool) -> impl Strategy<Value = String> {
    let mut choices: Vec<&'static str> = keys(depth);
    choices.push("*");
    let key = select(choices).prop_map(str::to_owned);
    if empty { prop_oneof![6 => key, 1 => Just(String::new())].boxed() } else { key.boxed() }
}

/// A request mask of 0 to 6 segments, sometimes empty ones.
fn mask() -> impl Strategy<Value = String> {
    (0usize..=6).prop_flat_map(|n| (0..n).map(|d| segment(d, true)).collect::<Vec<_>>()).prop_map(|s| s.join("."))
}

/// A rule's mask: 1 to 5 segments, keys or `*`.
fn rule_mask() -> impl Strategy<Value = String> {
    (1usize..=5).prop_flat_map(|n| (0..n).map(|d| segment(d, false)).collect::<Vec<_>>()).prop_map(|s| s.join("."))
}

fn rules(max: usize) -> impl Strategy<Value = Vec<AccessRule>> {
    let op = select(vec![ReadWrite::Read, ReadWrite::Write, ReadWrite::ReadWrite]);
    prop::collection::vec(
        (op, prop::collection::vec(rule_mask(), 1..3))
            .prop_map(|(operation, filter_masks)| AccessRule::StateRule { operation, filter_masks }),
        0..max,
    )
}

/// A request mask built on one of the allow rules' masks (so that many are
/// allowed): its `*`s sometimes made keys, up to two segments added (an
/// empty one among them sometimes); or, now and then, any mask.
fn derived_mask(allow: &[AccessRule]) -> BoxedStrategy<String> {
    let bases: Vec<String> = allow
        .iter()
        .flat_map(|r| match r {
            AccessRule::StateRule { filter_masks, .. } => filter_masks.clone(),
            AccessRule::LogRule { .. } => Vec::new(),
        })
        .collect();
    if bases.is_empty() {
        return mask().boxed();
    }
    let extension = select(vec!["a", "b", "state", "subState", "additionalInfo", "*", ""]);
    let derived = (select(bases), prop::collection::vec(any::<bool>(), 5), prop::collection::vec(extension, 0..=2))
        .prop_map(|(base, concretize, extra)| {
            let mut segments: Vec<String> = base
                .split('.')
                .zip(concretize.iter().chain(std::iter::repeat(&false)))
                .enumerate()
                .map(|(depth, (s, &c))| if s == "*" && c { keys(depth)[0].to_owned() } else { s.to_owned() })
                .collect();
            segments.extend(extra.into_iter().map(str::to_owned));
            segments.join(".")
        });
    prop_oneof![4 => derived, 1 => mask()].boxed()
}

/// Rules and masks of a request (at least `min` masks).
fn scenario(min: usize) -> impl Strategy<Value = (Vec<AccessRule>, Vec<AccessRule>, Vec<String>)> {
    (rules(4), rules(3)).prop_flat_map(move |(allow, deny)| {
        let masks = prop::collection::vec(derived_mask(&allow), min..3);
        (Just(allow), Just(deny), masks)
    })
}

/// Every leaf of `v` (an empty map counts as one) with its path.
fn leaves(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(k.clone());
                leaves(child, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

fn all_leaves(v: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    leaves(v, &mut Vec::new(), &mut out);
    out
}

/// The paths where `before` and `after` differ, as deep as maps go: a map
/// added or removed counts as its leaves (its parents were only created or
/// emptied on the way).
fn changed(before: Option<&Value>, after: Option<&Value>, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let map = |v: Option<&Value>| match v {
        Some(Value::Object(m)) => Some(m.clone()),
        None => Some(Map::new()),
        _ => None,
    };
    match (map(before), map(after)) {
        (Some(b), Some(a)) => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for k in keys {
                path.push(k.clone());
                changed(b.get(k), a.get(k), path, out);
                path.pop();
            }
        }
        _ if before != after => out.push(path.clone()),
        _ => {}
    }
}

/// The rules' masks of one side granted to `write` or read.
fn rule_paths(rules: &[AccessRule], write: bool) -> Vec<MaskPath> {
    rules
        .iter()
        .filter_map(|r| match r {
            AccessRule::StateRule { operation, filter_masks } => {
                let granted = matches!(
                    (operation, write),
                    (ReadWrite::ReadWrite, _) | (ReadWrite::Read, false) | (ReadWrite::Write, true)
                );
                granted.then_some(filter_masks)
            }
            AccessRule::LogRule { .. } => None,
        })
        .flatten()
        .map(|m| MaskPath::parse(m).expect("generated rules are valid"))
        .collect()
}

fn as_path(keys: &[String]) -> MaskPath {
    MaskPath::from_keys(keys).expect("state keys are not empty")
}

/// An execution state's `state` and `subState` are one field on the wire:
/// an allow rule for one covers the other.
fn wire_field(leaf: &[String]) -> Vec<Vec<String>> {
    let mut out = vec![leaf.to_vec()];
    if leaf.len() == 5 && leaf[0] == "workloadStates" {
        let other = match leaf[4].as_str() {
            "state" => Some("subState"),
            "subState" => Some("state"),
            _ => None,
        };
        if let Some(other) = other {
            let mut companion = leaf.to_vec();
            companion[4] = other.to_owned();
            out.push(companion);
        }
    }
    out
}

/// Checks one touched leaf against the rules; the error says what leaked.
fn check_leaf(leaf: &[String], allow: &[MaskPath], deny: &[MaskPath], what: &str) -> Result<(), TestCaseError> {
    let covered = wire_field(leaf).iter().any(|p| allow.iter().any(|r| r.covers(&as_path(p))));
    prop_assert!(covered, "{what} '{}' is covered by no allow rule", leaf.join("."));
    let path = as_path(leaf);
    let denied: Vec<String> = deny.iter().filter(|r| r.overlaps(&path)).map(ToString::to_string).collect();
    prop_assert!(denied.is_empty(), "{what} '{}' is named by the deny rules {denied:?}", leaf.join("."));
    Ok(())
}

fn authorizer(allow: &[AccessRule], deny: &[AccessRule]) -> Authorizer {
    Authorizer::new(ControlInterfaceAccess { allow_rules: allow.to_vec(), deny_rules: deny.to_vec() })
}

fn config() -> ProptestConfig {
    // Bounded, and no regression files written into the source tree.
    ProptestConfig { cases: 512, max_global_rejects: 8192, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// A read the authorizer lets through returns from the server only
    /// what the workload may read.
    #[test]
    fn what_the_authorizer_lets_read_is_what_the_server_returns(
        tree in state(),
        (allow, deny, masks) in scenario(0),
    ) {
        let request = RequestContent::CompleteState { field_mask: masks.clone(), subscribe_for_events: false };
        prop_assume!(authorizer(&allow, &deny).authorize(&request).is_ok());
        // What ank-server does with a CompleteStateRequest's masks.
        prop_assert!(field_mask::validate(&masks).is_ok(), "the server refuses what the authorizer let through");
        let read: Vec<String> = MaskPath::parse_all(&masks)
            .unwrap()
            .iter()
            .flat_map(field_mask::read_masks)
            .map(|m| m.to_string())
            .collect();
        let answer = field_mask::filter(&tree, &read);
        let (allow, deny) = (rule_paths(&allow, false), rule_paths(&deny, false));
        for leaf in all_leaves(&answer).iter().filter(|l| !l.is_empty()) {
            check_leaf(leaf, &allow, &deny, "the server returned")?;
        }
    }

    /// An update the authorizer lets through changes in the server's state
    /// only what the workload may write.
    #[test]
    fn what_the_authorizer_lets_write_is_what_the_server_changes(
        tree in state(),
        new_state in state(),
        (allow, deny, masks) in scenario(1),
    ) {
        let request = RequestContent::UpdateState { new_state: Box::default(), update_mask: masks.clone() };
        prop_assume!(authorizer(&allow, &deny).authorize(&request).is_ok());
        prop_assert!(field_mask::validate(&masks).is_ok(), "the server refuses what the authorizer let through");
        // What ank-server does with the masks: refuse an update Ankaios
        // cannot apply (a parent that is no map), else apply it.
        let mut after = tree.clone();
        if field_mask::check_update(&tree, &new_state, &masks).is_ok() {
            field_mask::apply_update(&mut after, &new_state, &masks);
        }
        let (allow, deny) = (rule_paths(&allow, true), rule_paths(&deny, true));
        let mut touched = Vec::new();
        changed(Some(&tree), Some(&after), &mut Vec::new(), &mut touched);
        for leaf in &touched {
            check_leaf(leaf, &allow, &deny, "the server changed")?;
        }
    }

    /// The authorizer and the server refuse the same masks for their shape.
    #[test]
    fn the_authorizer_and_the_server_refuse_the_same_masks(masks in prop::collection::vec(mask(), 1..3)) {
        let everything = authorizer(&[AccessRule::StateRule {
            operation: ReadWrite::ReadWrite,
            filter_masks: vec!["*".into()],
        }], &[]);
        let request = RequestContent::CompleteState { field_mask: masks.clone(), subscribe_for_events: false };
        let by_agent = everything.authorize(&request).err().map(|e| e.to_string());
        let by_server = field_mask::validate(&masks).err().map(|e| e.to_string());
        prop_assert_eq!(by_agent, by_server);
    }
}
