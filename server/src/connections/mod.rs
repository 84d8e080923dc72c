//! The registry of open gRPC streams (agents and commanders) with their
//! outbound queues, and which stream currently speaks for which agent. A
//! stream whose queue is full is dropped rather than blocking the server.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ank_common::AgentAttributes;
use ank_common::messages::FromServer;
use tokio::sync::mpsc;

mod outbox;

pub use outbox::{Out, Outbox};

/// Identifies one gRPC stream.
pub type ConnId = u64;

/// Which service a stream came in on, and so what it is sent unasked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnKind {
    Agent,
    /// A commander that gets the workload states the server pushes to the
    /// agents: the (deprecated) CliConnection, as in Ankaios, or a
    /// CommandConnection that asked for them with
    /// [`PUSH_STATES_HEADER`](ank_common::messages::PUSH_STATES_HEADER).
    Commander,
    /// A CommandConnection: only the answers to its own requests, as
    /// Ankaios sends to commanders.
    Command,
}

struct Connection {
    kind: ConnKind,
    tx: mpsc::Sender<FromServer>,
}

/// Open streams and connected agents.
#[derive(Default)]
pub struct Connections {
    conns: HashMap<ConnId, Connection>,
    agents: BTreeMap<String, (ConnId, AgentAttributes)>,
    /// Connected agents that have reported their load (before that, an
    /// agent has no status in Ankaios' complete state).
    status_reported: BTreeSet<String>,
    /// Agents seen in this server's life, and whether they report
    /// generations and conditions (this orchestrator's agents) or not
    /// (Ankaios agents).
    seen: BTreeMap<String, bool>,
}

impl Connections {
    pub fn open(&mut self, id: ConnId, kind: ConnKind, tx: mpsc::Sender<FromServer>) {
        self.conns.insert(id, Connection { kind, tx });
    }

    pub fn kind(&self, id: ConnId) -> Option<ConnKind> {
        self.conns.get(&id).map(|c| c.kind)
    }

    /// Forgets a stream; returns the agent it spoke for, if it still did.
    pub fn close(&mut self, id: ConnId) -> Option<String> {
        self.conns.remove(&id);
        let agent = self.agent_of(id)?;
        self.agents.remove(&agent);
        self.status_reported.remove(&agent);
        Some(agent)
    }

    /// Notes that `agent` has reported its load.
    pub fn mark_status_reported(&mut self, agent: &str) {
        if self.agents.contains_key(agent) {
            self.status_reported.insert(agent.to_owned());
        }
    }

    /// Whether `agent` has reported its load since it connected.
    pub fn status_reported(&self, agent: &str) -> bool {
        self.status_reported.contains(agent)
    }

    /// Registers `id` as the stream of `agent`; an older stream of the same
    /// agent is dropped (its client sees the stream end).
    pub fn register_agent(&mut self, id: ConnId, agent: &str, attributes: AgentAttributes) {
        if let Some((old, _)) = self.agents.insert(agent.to_owned(), (id, attributes))
            && old != id
        {
            tracing::info!("agent '{agent}' connected again; dropping its previous connection");
            self.conns.remove(&old);
            self.status_reported.remove(agent);
        }
    }

    /// Notes that `agent` said hello, and whether it reports generations
    /// and conditions.
    pub fn note_seen(&mut self, agent: &str, reports_conditions: bool) {
        self.seen.insert(agent.to_owned(), reports_conditions);
    }

    /// The agents seen in this server's life, connected or not, and
    /// whether they report generations and conditions.
    pub fn seen(&self) -> &BTreeMap<String, bool> {
        &self.seen
    }

    pub fn agent_of(&self, id: ConnId) -> Option<String> {
        self.agents.iter().find(|(_, (c, _))| *c == id).map(|(name, _)| name.clone())
    }

    pub fn is_connected(&self, agent: &str) -> bool {
        self.agents.contains_key(agent)
    }

    pub fn agent_attributes_mut(&mut self, agent: &str) -> Option<&mut AgentAttributes> {
        self.agents.get_mut(agent).map(|(_, a)| a)
    }

    /// How many agents are connected.
    pub fn agent_count(&self) -> usize {
        self.agents.len()
    }

    /// The connected agents and their attributes, by name, borrowed.
    pub fn agent_attributes(&self) -> impl Iterator<Item = (&str, &AgentAttributes)> {
        self.agents.iter().map(|(n, (_, a))| (n.as_str(), a))
    }

    pub fn agents(&self) -> BTreeMap<String, AgentAttributes> {
        self.agents.iter().map(|(n, (_, a))| (n.clone(), a.clone())).collect()
    }

    /// Queues the messages of an outbox on their streams, in order.
    pub fn deliver(&mut self, out: Vec<Out>) {
        for o in out {
            match o {
                Out::To(id, msg) => self.send(id, msg),
                Out::ToAgent(agent, msg) => self.send_to_agent(&agent, msg),
                Out::Broadcast { except, msg } => self.broadcast(except.as_deref(), &msg),
            }
        }
    }

    /// Queues `msg` for stream `id`; a full or closed queue drops the stream.
    pub fn send(&mut self, id: ConnId, msg: FromServer) {
        let Some(c) = self.conns.get(&id) else { return };
        if let Err(e) = c.tx.try_send(msg) {
            tracing::warn!("dropping connection {id}: cannot queue message ({e})");
            self.conns.remove(&id);
        }
    }

    /// Queues `msg` for the stream of `agent`, if connected.
    pub fn send_to_agent(&mut self, agent: &str, msg: FromServer) {
        if let Some((id, _)) = self.agents.get(agent) {
            let id = *id;
            self.send(id, msg);
        }
    }

    /// Queues `msg` for every commander that gets pushes and every agent
    /// except `except`.
    pub fn broadcast(&mut self, except_agent: Option<&str>, msg: &FromServer) {
        let except = except_agent.and_then(|a| self.agents.get(a)).map(|(id, _)| *id);
        let targets: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| Some(**id) != except && (c.kind == ConnKind::Commander || self.agent_of(**id).is_some()))
            .map(|(id, _)| *id)
            .collect();
        for id in targets {
            self.send(id, msg.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_stream_of_an_agent_replaces_the_first_in_one_step() {
        let mut conns = Connections::default();
        let (tx1, mut rx1) = mpsc::channel(4);
        let (tx2, mut rx2) = mpsc::channel(4);
        conns.open(1, ConnKind::Agent, tx1);
        conns.register_agent(1, "A", AgentAttributes::default());
        conns.open(2, ConnKind::Agent, tx2);
        conns.register_agent(2, "A", AgentAttributes::default());
        // The old stream is dropped: its client sees the end.
        assert!(rx1.recv().await.is_none());
        assert_eq!(conns.agent_of(2).as_deref(), Some("A"));
        assert!(conns.is_connected("A"));
        // The old stream's close does not disconnect the agent.
        assert_eq!(conns.close(1), None);
        assert!(conns.is_connected("A"));
        conns.send_to_agent("A", FromServer::ServerHello(Vec::new()));
        assert!(matches!(rx2.recv().await, Some(FromServer::ServerHello(_))));
        assert_eq!(conns.close(2).as_deref(), Some("A"));
        assert!(!conns.is_connected("A"));
    }
}
