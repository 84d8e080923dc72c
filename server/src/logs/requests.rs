//! The server's handlers for log requests: accept the names it knows,
//! forward per agent, route entries and stops back, cancel on request and
//! when a requester or an agent goes away.

use ank_common::WorkloadInstanceName;
use ank_common::messages::{FromServer, LogEntry, LogsRequest, Response, ResponseContent};

use crate::actor::AnkaiosServer;
use crate::connections::ConnId;
use crate::desired_state;
use crate::logs::campaigns::Requester;

impl AnkaiosServer {
    fn respond(&mut self, requester: &Requester, content: ResponseContent) {
        let response = Response { request_id: requester.request_id.clone(), content };
        self.io.out.send(requester.conn, FromServer::Response(response));
    }

    /// Whether `name` is an instance of the desired state.
    fn knows_instance(&self, name: &WorkloadInstanceName) -> bool {
        self.desired
            .current
            .rendered
            .workloads
            .iter()
            .any(|(wl_name, wl)| desired_state::spec_of(wl_name, wl).is_some_and(|spec| &spec.instance_name == name))
    }

    pub(crate) fn handle_logs_request(&mut self, conn: ConnId, request_id: String, request: LogsRequest) {
        let requester = Requester { conn, request_id };
        let accepted: Vec<WorkloadInstanceName> =
            request.workload_names.iter().filter(|n| self.knows_instance(n)).cloned().collect();
        self.respond(&requester, ResponseContent::LogsRequestAccepted(accepted.clone()));
        if accepted.is_empty() {
            return;
        }
        let (key, by_agent) = self.streams.logs.start(requester.clone(), &accepted);
        for (agent, names) in by_agent {
            if self.conns.is_connected(&agent) {
                let sub = LogsRequest { workload_names: names, ..request.clone() };
                self.io.out.send_to_agent(&agent, FromServer::LogsRequest { request_id: key.clone(), request: sub });
            } else {
                for name in names {
                    self.streams.logs.stopped(&key, &name);
                    let reason = format!("agent '{agent}' is not connected");
                    self.respond(&requester, ResponseContent::LogsStop { workload_name: name, reason });
                }
            }
        }
    }

    pub(crate) fn handle_logs_cancel(&mut self, conn: ConnId, request_id: String) {
        let requester = Requester { conn, request_id };
        if let Some((key, agents)) = self.streams.logs.cancel(&requester) {
            self.cancel_at_agents(&key, &agents);
        }
        self.respond(&requester, ResponseContent::LogsCancelAccepted);
    }

    fn cancel_at_agents(&mut self, key: &str, agents: &std::collections::BTreeSet<String>) {
        for agent in agents {
            self.io.out.send_to_agent(agent, FromServer::LogsCancelRequest { request_id: key.to_owned() });
        }
    }

    pub(crate) fn handle_log_entries(&mut self, key: &str, entries: Vec<LogEntry>) {
        if let Some(requester) = self.streams.logs.requester(key).cloned() {
            self.respond(&requester, ResponseContent::LogEntries(entries));
        }
    }

    pub(crate) fn handle_logs_stop(&mut self, key: &str, name: WorkloadInstanceName, reason: String) {
        if let Some(requester) = self.streams.logs.stopped(key, &name) {
            self.respond(&requester, ResponseContent::LogsStop { workload_name: name, reason });
        }
    }

    /// Ends the campaigns of a closed connection, and the logs of a lost agent.
    pub(crate) fn logs_connection_closed(&mut self, conn: ConnId, agent: Option<&str>) {
        for (key, agents) in self.streams.logs.requester_gone(conn) {
            self.cancel_at_agents(&key, &agents);
        }
        if let Some(agent) = agent {
            for (requester, name) in self.streams.logs.agent_gone(agent) {
                let reason = format!("agent '{agent}' disconnected");
                self.respond(&requester, ResponseContent::LogsStop { workload_name: name, reason });
            }
        }
    }
}
