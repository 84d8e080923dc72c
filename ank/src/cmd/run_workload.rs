//! `ank run workload NAME --runtime R --agent A --config CFG [--tags k=v]`:
//! adds one workload (mask `desiredState.workloads.NAME`) and waits for it.

use std::collections::BTreeMap;

use ank_common::convert::{PartialCompleteState, PartialState, PartialWorkload};
use ank_common::messages::RequestContent;
use ank_common::{AgentName, Workload, WorkloadName};
use anyhow::Context;

use crate::cli::RunWorkloadArgs;
use crate::cmd::{Ctx, update_and_follow};

/// The validated name and workload of the arguments.
pub fn workload_of(args: &RunWorkloadArgs) -> anyhow::Result<(WorkloadName, Workload)> {
    let name = WorkloadName::new(args.name.as_str()).context("invalid workload name")?;
    let agent = AgentName::new(args.agent.as_str()).context("invalid agent name")?;
    let workload = Workload {
        agent: agent.to_string(),
        runtime: args.runtime.clone(),
        runtime_config: args.config.clone(),
        tags: args.tags.iter().cloned().collect(),
        ..Default::default()
    };
    Ok((name, workload))
}

/// The update request adding `workload` as `name`.
pub fn run_request(name: &WorkloadName, workload: &Workload) -> anyhow::Result<RequestContent> {
    let new_state = PartialCompleteState::of_desired(PartialState {
        workloads: Some([(name.to_string(), PartialWorkload::from(workload))].into()),
        ..PartialState::current()
    });
    Ok(RequestContent::UpdateState {
        new_state: Box::new(new_state),
        update_mask: vec![format!("desiredState.workloads.{name}")],
    })
}

/// Adds the workload and (in wait mode) waits until it settled.
pub async fn run(ctx: &mut Ctx<'_>, args: RunWorkloadArgs) -> anyhow::Result<()> {
    let (name, workload) = workload_of(&args)?;
    let request = run_request(&name, &workload)?;
    let runtimes = BTreeMap::from([(name.to_string(), workload.runtime.clone())]);
    update_and_follow(ctx, request, runtimes, &[]).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, agent: &str) -> RunWorkloadArgs {
        RunWorkloadArgs {
            name: name.into(),
            runtime: "podman".into(),
            config: "image: nginx\n".into(),
            agent: agent.into(),
            tags: vec![("owner".into(), "me".into())],
        }
    }

    #[test]
    fn run_request_adds_one_workload_under_its_mask() {
        let (name, wl) = workload_of(&args("web", "agent_A")).unwrap();
        let RequestContent::UpdateState { new_state, update_mask } = run_request(&name, &wl).unwrap() else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(update_mask, vec!["desiredState.workloads.web"]);
        let w = &new_state["desiredState"]["workloads"]["web"];
        assert_eq!(w["agent"], "agent_A");
        assert_eq!(w["runtime"], "podman");
        assert_eq!(w["runtimeConfig"], "image: nginx\n");
        assert_eq!(w["tags"]["owner"], "me");
        assert_eq!(new_state["desiredState"]["apiVersion"], "v1");
        ank_common::convert::complete_state_from_json(&new_state).unwrap();
    }

    #[test]
    fn run_rejects_invalid_names() {
        assert!(workload_of(&args("we.b", "agent_A")).is_err());
        assert!(workload_of(&args("web", "agent A")).is_err());
    }
}
