//! The registry of open gRPC streams (agents and commanders) with their
//! outbound queues, and which stream currently speaks for which agent. A
//! stream whose queue is full is dropped rather than blocking the server.
//! An agent of this orchestrator is sent only the workload states it needs
//! ([`Interest`]); every other stream gets them all.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ank_common::messages::FromServer;
use ank_common::{AgentAttributes, WorkloadState};
use tokio::sync::mpsc;

mod interest;
mod load;
mod outbox;

pub use interest::Interest;
pub(crate) use load::LoadNews;
pub use outbox::{Out, Outbox};

/// The current states of the named workloads, except those of the agent
/// named second: what an agent is sent when it starts to need them.
pub trait CurrentStates {
    fn current_states(&self, workloads: &BTreeSet<String>, except_agent: &str) -> Vec<WorkloadState>;
}

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
    /// The agent this stream speaks for, once it said hello.
    agent: Option<String>,
    /// `Some`: only the states of these workloads are sent (an agent of
    /// this orchestrator); `None`: every state (Ankaios agents, commanders).
    interest: Option<Interest>,
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
        self.conns.insert(id, Connection { kind, tx, agent: None, interest: None });
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
        if let Some(c) = self.conns.get_mut(&id) {
            c.agent = Some(agent.to_owned());
        }
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
        if let Some(agent) = self.speaks_for(id) {
            return Some(agent.to_owned());
        }
        // A stream dropped for a full queue still speaks for its agent
        // until it closes.
        self.agents.iter().find(|(_, (c, _))| *c == id).map(|(name, _)| name.clone())
    }

    /// The agent stream `id` speaks for, if it still does.
    fn speaks_for(&self, id: ConnId) -> Option<&str> {
        let agent = self.conns.get(&id)?.agent.as_deref()?;
        (self.agents.get(agent)?.0 == id).then_some(agent)
    }

    /// From now on stream `id` is sent only the workload states its agent
    /// needs ([`Interest`]).
    pub fn send_needed_states_only(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.interest = Some(Interest::default());
        }
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
    /// `current` gives the states an agent starts to need.
    pub fn deliver(&mut self, out: Vec<Out>, current: &impl CurrentStates) {
        for o in out {
            match o {
                Out::To(id, msg) => self.deliver_to(id, msg, current),
                Out::ToAgent(agent, msg) => {
                    if let Some((id, _)) = self.agents.get(&agent) {
                        let id = *id;
                        self.deliver_to(id, msg, current);
                    }
                }
                Out::Broadcast { except, msg } => self.broadcast(except.as_deref(), &msg),
            }
        }
    }

    /// Queues `msg` for stream `id` through the stream's interest: a
    /// message that hands the agent workloads first sends the current
    /// states of what they make it need; a states message keeps only
    /// needed states.
    fn deliver_to(&mut self, id: ConnId, msg: FromServer, current: &impl CurrentStates) {
        let Some(c) = self.conns.get_mut(&id) else { return };
        let Some(interest) = c.interest.as_mut() else { return self.send(id, msg) };
        if matches!(msg, FromServer::UpdateWorkloadState(_)) {
            if let Some(narrowed) = interest.narrow(&msg) {
                self.send(id, narrowed);
            }
            return;
        }
        let new = interest.learn(&msg);
        if !new.is_empty() {
            let agent = c.agent.clone().unwrap_or_default();
            let states = current.current_states(&new, &agent);
            if !states.is_empty() {
                self.send(id, FromServer::UpdateWorkloadState(states));
            }
        }
        self.send(id, msg)
    }

    /// Queues `msg` for stream `id`; a full or closed queue drops the stream.
    pub fn send(&mut self, id: ConnId, msg: FromServer) {
        let Some(c) = self.conns.get(&id) else { return };
        if let Err(e) = c.tx.try_send(msg) {
            tracing::warn!("dropping connection {id}: cannot queue message ({e})");
            self.conns.remove(&id);
        }
    }

    /// Queues `msg` for every commander that gets pushes and every agent
    /// except `except`.
    /// A states message goes to an agent of this orchestrator only with
    /// the states it needs, and not at all if it needs none.
    pub fn broadcast(&mut self, except_agent: Option<&str>, msg: &FromServer) {
        let except = except_agent.and_then(|a| self.agents.get(a)).map(|(id, _)| *id);
        let mut sends = Vec::new();
        for (id, c) in &self.conns {
            if Some(*id) == except || (c.kind != ConnKind::Commander && self.speaks_for(*id).is_none()) {
                continue;
            }
            let narrowed = match &c.interest {
                Some(interest) => interest.narrow(msg),
                None => Some(msg.clone()),
            };
            sends.extend(narrowed.map(|m| (*id, m)));
        }
        for (id, msg) in sends {
            self.send(id, msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::workload::WorkloadSpec;
    use ank_common::{AddCondition, AgentName, ExecutionState, Workload, WorkloadName};

    use super::*;

    struct NoStates;

    impl CurrentStates for NoStates {
        fn current_states(&self, _: &BTreeSet<String>, _: &str) -> Vec<WorkloadState> {
            Vec::new()
        }
    }

    /// `db` runs on agent B and `log` on agent C.
    struct Current;

    impl CurrentStates for Current {
        fn current_states(&self, names: &BTreeSet<String>, except: &str) -> Vec<WorkloadState> {
            [state("db", "B"), state("log", "C")]
                .into_iter()
                .filter(|s| names.contains(&s.instance_name.workload_name) && s.instance_name.agent_name != except)
                .collect()
        }
    }

    fn state(name: &str, agent: &str) -> WorkloadState {
        let n = spec(name, agent, &[]).instance_name;
        WorkloadState::new(n, ExecutionState::running())
    }

    fn spec(name: &str, agent: &str, deps: &[&str]) -> WorkloadSpec {
        let workload = Workload {
            agent: agent.into(),
            runtime: "podman".into(),
            runtime_config: "image: x".into(),
            dependencies: deps.iter().map(|d| (WorkloadName::new(*d).unwrap(), AddCondition::Running)).collect(),
            ..Workload::default()
        };
        WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(agent).unwrap(), workload)
    }

    fn names(msg: &FromServer) -> Vec<String> {
        match msg {
            FromServer::UpdateWorkloadState(s) => {
                s.iter().map(|s| format!("{}@{}", s.instance_name.workload_name, s.instance_name.agent_name)).collect()
            }
            FromServer::ServerHello(s) => s.iter().map(|s| format!("hello {}", s.name())).collect(),
            other => vec![format!("{other:?}")],
        }
    }

    fn drain(rx: &mut mpsc::Receiver<FromServer>) -> Vec<Vec<String>> {
        std::iter::from_fn(|| rx.try_recv().ok()).map(|m| names(&m)).collect()
    }

    #[test]
    fn an_agent_of_ours_gets_only_the_states_its_workloads_need_and_ankaios_agents_get_all() {
        let mut conns = Connections::default();
        let (tx_ours, mut ours) = mpsc::channel(16);
        let (tx_ank, mut ank) = mpsc::channel(16);
        let (tx_cli, mut cli) = mpsc::channel(16);
        conns.open(1, ConnKind::Agent, tx_ours);
        conns.register_agent(1, "A", AgentAttributes::default());
        conns.send_needed_states_only(1);
        conns.open(2, ConnKind::Agent, tx_ank);
        conns.register_agent(2, "D", AgentAttributes::default());
        conns.open(3, ConnKind::Commander, tx_cli);
        // Before its workloads, agent A needs no state.
        conns.broadcast(None, &FromServer::UpdateWorkloadState(vec![state("db", "B"), state("log", "C")]));
        assert!(drain(&mut ours).is_empty());
        assert_eq!(drain(&mut ank), [["db@B", "log@C"]]);
        assert_eq!(drain(&mut cli), [["db@B", "log@C"]]);
        // Handed `web`, which depends on `db`: db's current state comes first.
        let hello = FromServer::ServerHello(vec![spec("web", "A", &["db"])]);
        conns.deliver(vec![Out::To(1, hello)], &Current);
        assert_eq!(drain(&mut ours), [vec!["db@B"], vec!["hello web"]]);
        // From now on db's states, and only those.
        conns.broadcast(Some("C"), &FromServer::UpdateWorkloadState(vec![state("log", "C"), state("db", "B")]));
        assert_eq!(drain(&mut ours), [["db@B"]]);
        assert_eq!(drain(&mut ank), [["log@C", "db@B"]]);
        // Sent directly too (after a hello).
        conns.deliver(vec![Out::To(1, FromServer::UpdateWorkloadState(vec![state("log", "C")]))], &Current);
        assert!(drain(&mut ours).is_empty());
    }

    #[test]
    fn a_stream_dropped_for_a_full_queue_still_speaks_for_its_agent_until_it_closes() {
        let mut conns = Connections::default();
        let (tx, _rx) = mpsc::channel(1);
        conns.open(1, ConnKind::Agent, tx);
        conns.register_agent(1, "A", AgentAttributes::default());
        conns.send(1, FromServer::ServerHello(Vec::new()));
        conns.send(1, FromServer::ServerHello(Vec::new()));
        assert_eq!(conns.agent_of(1).as_deref(), Some("A"));
        assert_eq!(conns.close(1).as_deref(), Some("A"));
        assert!(!conns.is_connected("A"));
    }

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
        conns.deliver(vec![Out::ToAgent("A".into(), FromServer::ServerHello(Vec::new()))], &NoStates);
        assert!(matches!(rx2.recv().await, Some(FromServer::ServerHello(_))));
        assert_eq!(conns.close(2).as_deref(), Some("A"));
        assert!(!conns.is_connected("A"));
    }
}
