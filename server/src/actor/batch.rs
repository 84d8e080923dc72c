//! State reports queued behind each other are handled as one batch: each
//! report is ingested (and its events sent) on its own, the jobs advance
//! once after the batch. Advancing the jobs looks at every unfinished item
//! of every running job, so with one step per report an apply of N agents
//! × 20 workloads cost O(N²); with the batches, a busy server steps less
//! often the more reports wait, and an idle one exactly as before (a lone
//! report is handled as any other command). An agent's load status does not
//! step the jobs at all (it moves no item), unless the placement opened one.

use ank_common::messages::ToServer;

use super::{AnkaiosServer, ServerCommand};

/// Most reports in one batch.
const MAX_BATCH: usize = 128;

/// Whether `cmd` is an agent's workload-state report.
fn is_state_report(cmd: &ServerCommand) -> bool {
    matches!(cmd, ServerCommand::Message { msg: ToServer::UpdateWorkloadState(_), .. })
}

impl AnkaiosServer {
    /// Routes `first`; if it is a state report, with the reports queued
    /// right behind it, then the command that ended the batch, in order.
    pub(super) fn handle_commands(&mut self, first: ServerCommand) {
        if !is_state_report(&first) {
            return self.handle_command(first);
        }
        let mut batch = vec![first];
        let mut after = None;
        while batch.len() < MAX_BATCH {
            match self.io.rx.try_recv() {
                Ok(cmd) if is_state_report(&cmd) => batch.push(cmd),
                Ok(cmd) => {
                    after = Some(cmd);
                    break;
                }
                Err(_) => break,
            }
        }
        if let [_] = batch[..] {
            self.handle_command(batch.remove(0));
        } else {
            for cmd in batch {
                if let ServerCommand::Message { conn, msg } = cmd {
                    self.with_events(|s| s.handle_message(conn, msg));
                }
            }
            self.with_events(Self::advance_jobs);
        }
        if let Some(cmd) = after {
            self.handle_command(cmd);
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent};
    use ank_common::{ExecutionState, WorkloadState};
    use tokio::sync::mpsc;

    use super::*;
    use crate::actor::{ConnKind, DesiredState, JobSettings, LifecycleOptions, ResyncSettings, ServerHandle};

    /// Handles what is queued, as the actor's loop does, one command (and
    /// the batch behind it) at a time.
    fn drain(s: &mut AnkaiosServer) {
        while let Ok(cmd) = s.io.rx.try_recv() {
            s.handle_commands(cmd);
            s.io.flush(&mut s.conns, &s.states, s.desired.current.state.workloads.len());
        }
    }

    fn hello(agent: &str) -> ToServer {
        ToServer::AgentHello {
            agent_name: agent.into(),
            protocol_version: ank_common::PROTOCOL_VERSION.into(),
            tags: Default::default(),
            reports_conditions: false,
            capabilities: Vec::new(),
            quota: Default::default(),
        }
    }

    /// A server with an empty desired state and the default settings.
    fn empty_server() -> (ServerHandle, AnkaiosServer) {
        let (resync, jobs) = (ResyncSettings::default(), JobSettings::default());
        AnkaiosServer::new_with(DesiredState::default(), None, resync, jobs, LifecycleOptions::default())
    }

    /// A server with (an Ankaios) agent A connected, all handled.
    async fn with_agent_a() -> (ServerHandle, AnkaiosServer, mpsc::Receiver<FromServer>) {
        let (handle, mut s) = empty_server();
        let (agent_tx, agent_rx) = mpsc::channel(64);
        handle.opened(1, ConnKind::Agent, agent_tx).await;
        handle.message(1, hello("A")).await;
        drain(&mut s);
        (handle, s, agent_rx)
    }

    fn request(id: &str, content: RequestContent) -> ToServer {
        ToServer::Request(Request { request_id: id.into(), content })
    }

    #[tokio::test]
    async fn queued_state_reports_advance_the_jobs_once_and_the_next_command_comes_after_them() {
        let (handle, mut s) = empty_server();
        let (agent_tx, mut agent_rx) = mpsc::channel(64);
        let (cli_tx, mut cli_rx) = mpsc::channel(64);
        handle.opened(1, ConnKind::Agent, agent_tx).await;
        handle.opened(2, ConnKind::Commander, cli_tx).await;
        handle.message(1, hello("A")).await;
        let names = ["a", "b", "c"];
        let workloads: serde_json::Map<String, serde_json::Value> = names
            .iter()
            .map(|n| {
                (n.to_string(), serde_json::json!({"runtime": "podman", "agent": "A", "runtimeConfig": "image: x"}))
            })
            .collect();
        let state = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": workloads}});
        let content = RequestContent::UpdateState { new_state: crate::test_support::typed(state), update_mask: vec![] };
        handle.message(2, request("apply", content)).await;
        drain(&mut s);
        let specs = loop {
            if let Some(FromServer::UpdateWorkload { added, .. }) = agent_rx.recv().await {
                break added;
            }
        };
        assert_eq!(specs.len(), 3);

        // Three reports queued behind each other, then a read.
        for spec in &specs {
            let running = WorkloadState::new(spec.instance_name.clone(), ExecutionState::running());
            handle.message(1, ToServer::UpdateWorkloadState(vec![running])).await;
        }
        let read = RequestContent::CompleteState { field_mask: vec!["jobs".into()], subscribe_for_events: false };
        handle.message(2, request("read", read)).await;
        let steps = s.jobs.steps();
        drain(&mut s);
        assert_eq!(s.jobs.steps() - steps, 1, "one step for the three reports");

        // The read came after all three: it sees the job done, and the
        // commander got the three states before its answer.
        let mut states = Vec::new();
        let tree = loop {
            match cli_rx.recv().await {
                Some(FromServer::UpdateWorkloadState(s)) => states.extend(s),
                Some(FromServer::Response(r)) if r.request_id == "read" => match r.content {
                    ResponseContent::CompleteState(tree) => break tree.to_json().unwrap(),
                    other => panic!("{other:?}"),
                },
                Some(_) => {}
                None => panic!("server gone"),
            }
        };
        let running: Vec<&str> = states
            .iter()
            .filter(|s| s.execution_state == ExecutionState::running())
            .map(|s| s.instance_name.workload_name.as_str())
            .collect();
        assert_eq!(running, names);
        assert_eq!(tree["jobs"]["1"]["phase"], "Succeeded", "{tree}");
    }

    #[tokio::test]
    async fn an_agents_load_status_does_not_step_the_jobs() {
        let (handle, mut s, _agent_rx) = with_agent_a().await;
        let steps = s.jobs.steps();
        for _ in 0..3 {
            let load = ToServer::AgentLoadStatus {
                agent_name: "A".into(),
                status: Default::default(),
                metrics: Default::default(),
                quota_used: Default::default(),
            };
            handle.message(1, load).await;
            drain(&mut s);
        }
        assert_eq!(s.jobs.steps(), steps);
    }

    #[tokio::test]
    async fn a_lone_state_report_is_handled_as_any_command() {
        let (handle, mut s, _agent_rx) = with_agent_a().await;
        let steps = s.jobs.steps();
        handle.message(1, ToServer::UpdateWorkloadState(Vec::new())).await;
        drain(&mut s);
        handle.message(1, ToServer::UpdateWorkloadState(Vec::new())).await;
        drain(&mut s);
        assert_eq!(s.jobs.steps() - steps, 2);
    }
}
