//! `ank set state MASK... FILE`: copies the parts the masks select from a
//! YAML file (in the shape of `ank get state`; `-` is standard input) into
//! the state, then waits for the workloads that changed.

use std::io::Read;

use ank_common::convert::PartialCompleteState;
use ank_common::messages::RequestContent;
use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::SetStateArgs;
use crate::cmd::{Ctx, update_and_follow};
use crate::error_text::YamlObjectInvalid;
use crate::view::StateView;

/// The update request of `masks` with the state in the YAML `text` of
/// `source`. A file without `desiredState` (or with an empty one) gets the
/// current apiVersion; a `desiredState` mapping without `apiVersion` is
/// refused, as Ankaios' `ank` refuses it.
pub fn set_request(source: &str, text: &str, masks: Vec<String>) -> anyhow::Result<RequestContent> {
    let mut tree: Value = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(text).with_context(|| format!("{source}: invalid YAML"))?
    };
    let Some(root) = tree.as_object_mut() else { bail!("{source}: the state must be a mapping") };
    let desired = root.entry("desiredState").or_insert(Value::Null);
    if desired.is_null() {
        *desired = serde_json::json!({"apiVersion": ank_common::API_VERSION});
    }
    let Some(desired) = desired.as_object_mut() else { bail!("{source}: 'desiredState' must be a mapping") };
    if !desired.contains_key("apiVersion") {
        return Err(YamlObjectInvalid("missing field `apiVersion`".to_owned()).into());
    }
    let new_state = PartialCompleteState::from_json(&tree).with_context(|| format!("{source}: not a valid state"))?;
    Ok(RequestContent::UpdateState { new_state: Box::new(new_state), update_mask: masks })
}

/// Sets the state and (in wait mode) waits for the changed workloads.
pub async fn run(ctx: &mut Ctx<'_>, args: SetStateArgs) -> anyhow::Result<()> {
    let (source, text) = if args.file == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read the state from standard input")?;
        ("<stdin>".to_owned(), text)
    } else {
        let text = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read '{}'", args.file))?;
        (args.file.clone(), text)
    };
    for warning in misplaced_masks(&source, &text, &args.masks) {
        ctx.warn(&warning);
    }
    let request = set_request(&source, &text, args.masks)?;
    let runtimes = match &request {
        RequestContent::UpdateState { new_state, .. } => StateView::of((**new_state).clone()).runtimes(),
        _ => Default::default(),
    };
    update_and_follow(ctx, request, runtimes, &[]).await.map(|_| ())
}

/// A warning for each mask whose first key is not at the top of a
/// non-empty file: as in Ankaios, the update removes what such a mask names
/// (a whole workload, an agent's tags). An empty file removes on purpose;
/// a file written as the value at the mask (`tags: {arch: arm64}` for
/// `agents.agent_A.tags`) instead of in the shape of `ank get state` does
/// it by mistake.
pub fn misplaced_masks(source: &str, text: &str, masks: &[String]) -> Vec<String> {
    let Ok(Value::Object(top)) = serde_saphyr::from_str::<Value>(text) else { return Vec::new() };
    if top.is_empty() {
        return Vec::new();
    }
    masks
        .iter()
        .filter(|mask| mask.split('.').next().is_some_and(|first| !top.contains_key(first)))
        .map(|mask| {
            let example = shape_of(mask);
            format!(
                "{source} has nothing at '{mask}': the update removes it. The file has the shape of `ank get state`, \
                 the mask's path included, e.g.\n{example}"
            )
        })
        .collect()
}

/// The nesting of `mask` as YAML, with `...` at its end.
fn shape_of(mask: &str) -> String {
    let mut text = String::new();
    for (depth, key) in mask.split('.').enumerate() {
        text.push_str(&format!("{}{key}:\n", "  ".repeat(depth + 1)));
    }
    text.push_str(&format!("{}...", "  ".repeat(mask.split('.').count() + 1)));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_state_request_keeps_masks_and_defaults_the_api_version_of_a_file_without_desired_state() {
        let text = "desiredState:\n  apiVersion: v1\n  workloads:\n    w:\n      runtime: podman\n      agent: a\n      \
                    runtimeConfig: x\n";
        let RequestContent::UpdateState { new_state, update_mask } =
            set_request("s.yaml", text, vec!["desiredState.workloads.w".into()]).unwrap()
        else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(update_mask, vec!["desiredState.workloads.w"]);
        assert_eq!(new_state["desiredState"]["apiVersion"], "v1");
        assert_eq!(new_state["desiredState"]["workloads"]["w"]["runtime"], "podman");
        for empty in ["", "desiredState:\n", "agents: {}\n"] {
            let RequestContent::UpdateState { new_state, .. } =
                set_request("e.yaml", empty, vec!["desiredState.workloads.w".into()]).unwrap()
            else {
                panic!("not an update")
            };
            let new_state = new_state.to_json().unwrap();
            assert_eq!(new_state["desiredState"], json!({"apiVersion": "v1"}), "{empty:?}");
        }
    }

    // Twin scenario set_state_no_api_version: a `desiredState` without
    // `apiVersion` is refused as Ankaios' `ank` refuses it (its state type
    // needs the field), with its words; nothing is sent.
    #[test]
    fn set_state_refuses_a_desired_state_without_api_version() {
        let text =
            "desiredState:\n  workloads:\n    w:\n      runtime: podman\n      agent: a\n      runtimeConfig: x\n";
        for text in [text, "desiredState: {}\n"] {
            let err = set_request("s.yaml", text, vec!["desiredState.workloads.w".into()]).unwrap_err();
            assert_eq!(
                crate::error_text::reword(crate::error_text::WriteCommand::SetState, err).to_string(),
                "Failed to set state: 'Could not serialize YAML object: 'missing field `apiVersion`''",
                "{text:?}"
            );
        }
    }

    #[test]
    fn set_state_rejects_malformed_files() {
        let e = set_request("s.yaml", "- a\n- b\n", vec!["x".into()]).unwrap_err();
        assert!(format!("{e:#}").contains("s.yaml"), "{e:#}");
        let e = set_request("s.yaml", "desiredState:\n  workloads:\n    w:\n      restartPolicy: SOMETIMES\n", vec![]);
        assert!(e.is_err());
    }

    // Issue 26: `tags: {arch: arm64}` at the top of the file is no agent's
    // tags; the update would remove them, and `ank` says so. An empty file
    // removes on purpose, without a warning.
    #[test]
    fn set_state_warns_when_a_mask_is_not_where_the_file_starts() {
        let masks = vec!["agents.agent_A.tags".to_owned()];
        let warnings = misplaced_masks("tags.yaml", "tags:\n  arch: arm64\n", &masks);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("tags.yaml has nothing at 'agents.agent_A.tags': the update removes it."));
        assert!(warnings[0].ends_with("  agents:\n    agent_A:\n      tags:\n        ..."), "{}", warnings[0]);
        let good = "agents:\n  agent_A:\n    tags:\n      arch: arm64\n";
        assert!(misplaced_masks("tags.yaml", good, &masks).is_empty());
        assert!(misplaced_masks("empty.yaml", "", &masks).is_empty());
        assert!(misplaced_masks("empty.yaml", "{}", &masks).is_empty());
        let delete = vec!["desiredState.workloads.gone".to_owned()];
        assert!(misplaced_masks("s.yaml", "desiredState:\n  workloads: {}\n", &delete).is_empty());
    }
}
