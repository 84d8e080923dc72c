//! `ank delete configs NAME...`: removes configs from the desired state
//! (masks `desiredState.configs.<name>`, absent from the new state).

use std::collections::BTreeSet;

use ank_common::convert::{PartialCompleteState, PartialState};
use ank_common::messages::RequestContent;
use anyhow::bail;

use crate::cmd::{Ctx, update_and_follow};

/// The update request deleting the configs `names`.
pub fn delete_request(names: &[String]) -> anyhow::Result<RequestContent> {
    let names: BTreeSet<&String> = names.iter().collect();
    if let Some(bad) = names.iter().find(|n| n.is_empty() || n.contains('.')) {
        bail!("'{bad}' is not a config name");
    }
    let update_mask = names.iter().map(|n| format!("desiredState.configs.{n}")).collect();
    let new_state = PartialCompleteState::of_desired(PartialState::current());
    Ok(RequestContent::UpdateState { new_state: Box::new(new_state), update_mask })
}

/// Deletes the configs; workloads using them are the server's concern.
pub async fn run(ctx: &mut Ctx<'_>, names: &[String]) -> anyhow::Result<()> {
    update_and_follow(ctx, delete_request(names)?, Default::default(), &[]).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn delete_configs_request_masks_each_config() {
        let RequestContent::UpdateState { new_state, update_mask } =
            delete_request(&["port".into(), "host".into()]).unwrap()
        else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(update_mask, vec!["desiredState.configs.host", "desiredState.configs.port"]);
        assert_eq!(new_state, json!({"desiredState": {"apiVersion": "v1"}}));
        assert!(delete_request(&["a.b".into()]).is_err());
    }
}
