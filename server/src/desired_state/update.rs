//! Applying an UpdateStateRequest to the desired state. An update whose
//! masks each name one workload or one config item
//! (`desiredState.workloads.<name>`, `desiredState.configs.<key>`), what
//! `ank apply` and `ank delete` send, is merged on the typed state: only
//! the named entries of the typed request are taken, each read into a
//! `Workload` without JSON ([`PartialWorkload::to_workload`]). So is an
//! update without a mask (replace everything). Any other update (a deeper
//! or wildcard mask; an entry that is not a whole workload) is merged on
//! the JSON tree of the state, which also words the error of an entry
//! that does not read.
//!
//! [`PartialWorkload::to_workload`]: ank_common::convert::PartialWorkload::to_workload

use ank_common::convert::PartialCompleteState;
use ank_common::{API_VERSION, State, WorkloadName, field_mask};
use serde_json::{Value, json};

use super::{DesiredState, InvalidState};

/// Applies an update request to `current`, returning the validated and
/// rendered result; workloads the update leaves alone keep their rendering.
pub fn apply_update(
    current: &DesiredState,
    new_state: &PartialCompleteState,
    update_mask: &[String],
) -> Result<DesiredState, InvalidState> {
    let new_version = new_state.desired_state.as_ref().map_or("", |d| d.api_version.as_str());
    if new_version == ank_common::manifest::DEPRECATED_API_VERSION {
        tracing::warn!("update with the deprecated apiVersion '{new_version}' accepted as '{API_VERSION}'");
    } else if !new_version.is_empty() && new_version != API_VERSION {
        return Err(InvalidState::ApiVersion(new_version.to_owned()));
    }
    let deprecated = new_version == ank_common::manifest::DEPRECATED_API_VERSION;
    let replaced = || match &new_state.desired_state {
        Some(d) => d.to_state(),
        None => Some(State::default()),
    };
    let next = if update_mask.is_empty()
        && let Some(mut next) = replaced()
    {
        if deprecated {
            next.api_version = API_VERSION.to_owned();
        }
        next
    } else if update_mask.is_empty() {
        // Read on the JSON tree, which words the error.
        let mut desired = match &new_state.desired_state {
            Some(d) => serde_json::to_value(d).map_err(|e| InvalidState::Unreadable(e.to_string()))?,
            None => json!({}),
        };
        if deprecated {
            desired["apiVersion"] = json!(API_VERSION);
        }
        serde_json::from_value::<State>(desired).map_err(|e| InvalidState::Unreadable(e.to_string()))?
    } else {
        let masks: Vec<String> =
            update_mask.iter().filter(|m| m.split('.').next() == Some("desiredState")).cloned().collect();
        match merge_entries(&current.state, new_state, &masks) {
            Some(next) => next,
            None => {
                let tree = new_state.to_json().map_err(|e| InvalidState::Unreadable(e.to_string()))?;
                merge_tree(&current.state, &tree, &masks)?
            }
        }
    };
    current.after(next)
}

/// One entry of the desired state that a mask names.
enum Entry<'a> {
    Workload(&'a str),
    Config(&'a str),
}

/// Whether `mask` names exactly one workload or config item of the desired
/// state. Setting or removing such an entry always finds its parents (the
/// JSON form of a state always has `workloads` and `configs`).
pub fn names_one_entry(mask: &str) -> bool {
    entry_of(mask).is_some()
}

/// The entry `mask` names, if it names exactly one (no wildcard).
fn entry_of(mask: &str) -> Option<Entry<'_>> {
    let mut segments = mask.split('.');
    let (Some("desiredState"), Some(kind), Some(key), None) =
        (segments.next(), segments.next(), segments.next(), segments.next())
    else {
        return None;
    };
    if key.is_empty() || key == "*" {
        return None;
    }
    match kind {
        "workloads" => Some(Entry::Workload(key)),
        "configs" => Some(Entry::Config(key)),
        _ => None,
    }
}

/// The update merged on the typed state, when every mask names one entry
/// and every workload the request carries is whole; `None` otherwise.
fn merge_entries(current: &State, new_state: &PartialCompleteState, masks: &[String]) -> Option<State> {
    let entries: Vec<Entry> = masks.iter().map(|m| entry_of(m)).collect::<Option<_>>()?;
    let desired = new_state.desired_state.as_ref();
    let mut next = current.clone();
    for entry in entries {
        match entry {
            Entry::Workload(key) => {
                let name = WorkloadName::new(key).ok()?;
                match desired.and_then(|d| d.workloads.as_ref()).and_then(|w| w.get(key)) {
                    // Read by the same rules as a workload of a manifest.
                    Some(w) => next.workloads.insert(name, w.to_workload()?),
                    None => next.workloads.remove(&name),
                };
            }
            Entry::Config(key) => match desired.and_then(|d| d.configs.as_ref()).and_then(|c| c.get(key)) {
                Some(item) => {
                    next.configs.insert(key.to_owned(), item.clone());
                }
                None => {
                    next.configs.remove(key);
                }
            },
        }
    }
    next.api_version = API_VERSION.to_owned();
    Some(next)
}

/// The update merged on the JSON tree of the state.
/// `masks` is never empty here: without a desired-state mask (e.g. only
/// agent tags) every mask names an entry, vacuously.
fn merge_tree(current: &State, new_state: &Value, masks: &[String]) -> Result<State, InvalidState> {
    let unreadable = |e: serde_json::Error| InvalidState::Unreadable(e.to_string());
    let mut tree = json!({ "desiredState": serde_json::to_value(current).map_err(unreadable)? });
    field_mask::apply_update(&mut tree, new_state, masks);
    if let Some(d) = tree.get_mut("desiredState") {
        d["apiVersion"] = json!(API_VERSION);
    }
    let desired = tree.get("desiredState").cloned().unwrap_or_else(|| json!({}));
    serde_json::from_value::<State>(desired).map_err(unreadable)
}
