//! The actor's handlers of the agents' connection messages: hellos and
//! closed streams (the store decides what a disconnected agent's workloads
//! show). Workload-state reports are taken in by the store
//! (`workload_states/reports.rs`), which returns what to push; load reports
//! go to the connections (`connections/load.rs`), which say when placement
//! must look again.

use std::collections::BTreeMap;

use ank_common::AgentAttributes;
use ank_common::messages::FromServer;
use ank_common::quota::{AgentQuota, QuotaLimits};

use super::AnkaiosServer;
use crate::connections::{ConnId, ConnKind};
use crate::desired_state;
use crate::placement::Occasion;

/// What an agent's hello says besides its name and version.
pub(super) struct Hello {
    pub(super) tags: BTreeMap<String, String>,
    pub(super) reports_conditions: bool,
    pub(super) capabilities: Vec<String>,
    pub(super) quota: QuotaLimits,
}

impl AnkaiosServer {
    // [impl->swdd~agent-sends-hello~1]
    pub(super) fn handle_agent_hello(&mut self, conn: ConnId, agent: &str, version: &str, hello: Hello) {
        let Hello { tags, reports_conditions, capabilities, quota } = hello;
        if self.conns.kind(conn) != Some(ConnKind::Agent) {
            tracing::warn!("connection {conn}: AgentHello on a non-agent stream ignored");
            return;
        }
        // A stream speaks for the agent of its first hello; a later hello
        // (the gRPC edge already drops them, as Ankaios) changes nothing.
        if let Some(current) = self.conns.agent_of(conn) {
            tracing::warn!("connection {conn} of agent '{current}': later AgentHello as '{agent}' ignored");
            return;
        }
        if let Err(e) = ank_common::names::validate_agent_node_name(agent) {
            tracing::warn!("rejecting agent: {e}");
            self.conns.close(conn);
            return;
        }
        if !ank_common::is_compatible_protocol(version) {
            tracing::warn!("rejecting agent '{agent}': protocol version '{version}' is not compatible");
            self.conns.close(conn);
            return;
        }
        tracing::info!("agent '{agent}' connected");
        // [feature K2: the server keeps each agent's quota (none: unlimited)]
        // An agent without our extensions (Eclipse Ankaios' own) reports no
        // generations, conditions or quota: shown as "not reported".
        let not_reported = if reports_conditions {
            Vec::new()
        } else {
            ank_common::complete_state::NOT_REPORTED_BY_ANKAIOS_AGENTS.iter().map(|s| (*s).to_owned()).collect()
        };
        let attributes = AgentAttributes {
            tags,
            capabilities,
            quota: AgentQuota::of(quota),
            not_reported,
            ..AgentAttributes::default()
        };
        self.conns.register_agent(conn, agent, attributes);
        self.conns.note_seen(agent, reports_conditions);
        // [feature: an agent of this orchestrator is sent only the states
        // its workloads' dependencies need; Ankaios agents get all]
        if reports_conditions {
            self.conns.send_needed_states_only(conn);
        }
        // Specs a job holds back go out when the job hands them out.
        let mut specs = desired_state::specs_for_agent(&self.desired.current.rendered, agent);
        specs.retain(|s| !self.jobs.is_held(s.name()));
        let specs = specs.into_iter().map(|s| self.desired.generations.stamp(s)).collect();
        self.io.out.send(conn, FromServer::ServerHello(specs));
        // Before the leftovers are deleted: an instance placed here again
        // is no leftover.
        self.placement_on(Occasion::Joined(agent));
        let (current, generations) = (&self.desired.current, &self.desired.generations);
        let resync = self.lifecycle.resync.over(&mut self.states, &self.conns, &self.jobs, current, generations);
        let out = resync.finish_deletions_after_hello(conn, agent, reports_conditions);
        self.io.out.append(out);
        // An agent of ours got the states it needs with the workloads that
        // need them.
        if !reports_conditions {
            let others = self.states.all_except(Some(agent));
            if !others.is_empty() {
                self.io.out.send(conn, FromServer::UpdateWorkloadState(others));
            }
        }
    }

    pub(crate) fn handle_closed(&mut self, conn: ConnId) {
        self.streams.events.remove_where(conn, |_| true);
        let agent = self.conns.close(conn);
        self.io.out.append(self.streams.logs.connection_closed(conn, agent.as_deref()));
        if let Some(agent) = agent {
            tracing::info!("agent '{agent}' disconnected");
            self.placement_on(Occasion::Left(&agent));
            let changed = self.states.agent_disconnected(&agent, &self.desired.current.rendered);
            if !changed.is_empty() {
                self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
            }
        }
    }
}
