//! The log requests a campaign serves: accept the names the desired state
//! knows, forward per agent, route entries and stops back, cancel on
//! request and when a requester or an agent goes away. Each handler
//! returns the messages to send.

use std::collections::BTreeSet;

use ank_common::messages::{FromServer, LogEntry, LogsRequest, Response, ResponseContent};
use ank_common::{State, WorkloadInstanceName};

use super::campaigns::{LogCampaigns, Requester};
use crate::connections::{ConnId, Connections, Outbox};
use crate::desired_state;

fn respond(out: &mut Outbox, requester: &Requester, content: ResponseContent) {
    let response = Response { request_id: requester.request_id.clone(), content };
    out.send(requester.conn, FromServer::Response(response));
}

/// Whether `name` is an instance of the rendered desired state.
fn knows_instance(rendered: &State, name: &WorkloadInstanceName) -> bool {
    rendered
        .workloads
        .iter()
        .any(|(wl_name, wl)| desired_state::spec_of(wl_name, wl).is_some_and(|spec| &spec.instance_name == name))
}

fn cancel_at_agents(out: &mut Outbox, key: &str, agents: &BTreeSet<String>) {
    for agent in agents {
        out.send_to_agent(agent, FromServer::LogsCancelRequest { request_id: key.to_owned() });
    }
}

impl LogCampaigns {
    /// A commander asks for the logs of workloads of `rendered`.
    pub(crate) fn request(
        &mut self,
        requester: Requester,
        request: LogsRequest,
        rendered: &State,
        conns: &Connections,
    ) -> Outbox {
        let mut out = Outbox::default();
        let accepted: Vec<WorkloadInstanceName> =
            request.workload_names.iter().filter(|n| knows_instance(rendered, n)).cloned().collect();
        respond(&mut out, &requester, ResponseContent::LogsRequestAccepted(accepted.clone()));
        if accepted.is_empty() {
            return out;
        }
        let (key, by_agent) = self.start(requester.clone(), &accepted);
        for (agent, names) in by_agent {
            if conns.is_connected(&agent) {
                let sub = LogsRequest { workload_names: names, ..request.clone() };
                out.send_to_agent(&agent, FromServer::LogsRequest { request_id: key.clone(), request: sub });
            } else {
                for name in names {
                    self.stopped(&key, &name);
                    let reason = format!("agent '{agent}' is not connected");
                    respond(&mut out, &requester, ResponseContent::LogsStop { workload_name: name, reason });
                }
            }
        }
        out
    }

    /// A commander cancels its request.
    pub(crate) fn cancel_request(&mut self, requester: &Requester) -> Outbox {
        let mut out = Outbox::default();
        if let Some((key, agents)) = self.cancel(requester) {
            cancel_at_agents(&mut out, &key, &agents);
        }
        respond(&mut out, requester, ResponseContent::LogsCancelAccepted);
        out
    }

    /// Agent `from` sent entries of campaign `key`: passed on only when
    /// the campaign asked `from` for them, and only the entries of its own
    /// workloads whose log is still open in the campaign; a stream that is
    /// no agent sends none. So no connection can put lines into another
    /// connection's log stream.
    pub(crate) fn entries(&self, key: &str, from: Option<&str>, entries: Vec<LogEntry>) -> Outbox {
        let mut out = Outbox::default();
        let Some(from) = from else {
            tracing::warn!("log entries for '{key}' from a stream that is no agent dropped");
            return out;
        };
        let sent = entries.len();
        let entries: Vec<LogEntry> = entries
            .into_iter()
            .filter(|e| e.workload_name.agent_name == from && self.is_open(key, &e.workload_name))
            .collect();
        if entries.len() != sent {
            tracing::warn!("agent '{from}': {} log entries for '{key}' not asked of it dropped", sent - entries.len());
        }
        if let Some(requester) = self.requester(key).filter(|_| !entries.is_empty()) {
            respond(&mut out, requester, ResponseContent::LogEntries(entries));
        }
        out
    }

    /// Agent `from` ended the log of `name` in campaign `key`; only the
    /// agent of `name` can end it.
    pub(crate) fn stop(&mut self, key: &str, from: Option<&str>, name: WorkloadInstanceName, reason: String) -> Outbox {
        let mut out = Outbox::default();
        if from != Some(name.agent_name.as_str()) {
            tracing::warn!("end of the log of '{name}' for '{key}' from {from:?}, not its agent, dropped");
            return out;
        }
        if let Some(requester) = self.stopped(key, &name) {
            respond(&mut out, &requester, ResponseContent::LogsStop { workload_name: name, reason });
        }
        out
    }

    /// Ends the campaigns of a closed connection, and the logs of a lost agent.
    pub(crate) fn connection_closed(&mut self, conn: ConnId, agent: Option<&str>) -> Outbox {
        let mut out = Outbox::default();
        for (key, agents) in self.requester_gone(conn) {
            cancel_at_agents(&mut out, &key, &agents);
        }
        if let Some(agent) = agent {
            for (requester, name) in self.agent_gone(agent) {
                let reason = format!("agent '{agent}' disconnected");
                respond(&mut out, &requester, ResponseContent::LogsStop { workload_name: name, reason });
            }
        }
        out
    }
}
