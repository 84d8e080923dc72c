//! [`LogCampaigns`]: the log requests the server is serving. A request of a
//! commander (or, later, of a workload) is split by agent and forwarded
//! under a server-wide key; entries and stop messages of the agents go back
//! to the requester under its own request id. A campaign ends when every
//! workload's log ended, on cancel, or when its requester goes away; a lost
//! agent ends the logs of its workloads.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ank_common::WorkloadInstanceName;

use crate::connections::ConnId;

/// Who asked, and for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requester {
    pub conn: ConnId,
    pub request_id: String,
}

#[derive(Debug)]
struct Campaign {
    requester: Requester,
    /// Workloads whose log has not ended yet.
    open: BTreeSet<WorkloadInstanceName>,
}

/// The campaigns by the key sent to the agents.
#[derive(Debug, Default)]
pub struct LogCampaigns {
    campaigns: HashMap<String, Campaign>,
}

/// The key under which a requester's request goes to the agents: unique
/// across connections (two CLIs may use the same request id).
pub fn key_of(requester: &Requester) -> String {
    format!("{}@{}", requester.conn, requester.request_id)
}

impl LogCampaigns {
    /// Records a campaign for `names`; returns its key and the names by agent.
    pub fn start(
        &mut self,
        requester: Requester,
        names: &[WorkloadInstanceName],
    ) -> (String, BTreeMap<String, Vec<WorkloadInstanceName>>) {
        let key = key_of(&requester);
        let mut by_agent: BTreeMap<String, Vec<WorkloadInstanceName>> = BTreeMap::new();
        for n in names {
            by_agent.entry(n.agent_name.clone()).or_default().push(n.clone());
        }
        self.campaigns.insert(key.clone(), Campaign { requester, open: names.iter().cloned().collect() });
        (key, by_agent)
    }

    /// The requester of the campaign `key`.
    pub fn requester(&self, key: &str) -> Option<&Requester> {
        self.campaigns.get(key).map(|c| &c.requester)
    }

    /// How many campaigns connection `conn` has open.
    pub fn count(&self, conn: ConnId) -> usize {
        self.campaigns.values().filter(|c| c.requester.conn == conn).count()
    }

    /// Whether `requester` has a campaign open under its request id.
    pub fn has(&self, requester: &Requester) -> bool {
        self.campaigns.contains_key(&key_of(requester))
    }

    /// Whether the log of `name` is still open in campaign `key`.
    pub fn is_open(&self, key: &str, name: &WorkloadInstanceName) -> bool {
        self.campaigns.get(key).is_some_and(|c| c.open.contains(name))
    }

    /// The log of `name` ended; returns the requester to tell. The campaign
    /// ends with its last workload.
    pub fn stopped(&mut self, key: &str, name: &WorkloadInstanceName) -> Option<Requester> {
        let campaign = self.campaigns.get_mut(key)?;
        if !campaign.open.remove(name) {
            return None;
        }
        let requester = campaign.requester.clone();
        if campaign.open.is_empty() {
            self.campaigns.remove(key);
        }
        Some(requester)
    }

    /// Ends a requester's campaign; returns its key and the agents serving it.
    pub fn cancel(&mut self, requester: &Requester) -> Option<(String, BTreeSet<String>)> {
        let key = key_of(requester);
        let campaign = self.campaigns.remove(&key)?;
        Some((key, campaign.open.iter().map(|n| n.agent_name.clone()).collect()))
    }

    /// Ends every campaign of a closed connection; returns keys and agents.
    pub fn requester_gone(&mut self, conn: ConnId) -> Vec<(String, BTreeSet<String>)> {
        let keys: Vec<String> =
            self.campaigns.iter().filter(|(_, c)| c.requester.conn == conn).map(|(k, _)| k.clone()).collect();
        keys.into_iter()
            .filter_map(|k| {
                let c = self.campaigns.remove(&k)?;
                Some((k, c.open.iter().map(|n| n.agent_name.clone()).collect()))
            })
            .collect()
    }

    /// Ends the logs of `agent`'s workloads (the agent is gone); returns the
    /// stop messages to send: (requester, workload).
    pub fn agent_gone(&mut self, agent: &str) -> Vec<(Requester, WorkloadInstanceName)> {
        let mut stops = Vec::new();
        for c in self.campaigns.values_mut() {
            let gone: Vec<WorkloadInstanceName> = c.open.iter().filter(|n| n.agent_name == agent).cloned().collect();
            for n in gone {
                c.open.remove(&n);
                stops.push((c.requester.clone(), n));
            }
        }
        self.campaigns.retain(|_, c| !c.open.is_empty());
        stops
    }
}

#[cfg(test)]
mod tests {
    use ank_common::{AgentName, WorkloadName};

    use super::*;

    fn name(w: &str, agent: &str) -> WorkloadInstanceName {
        WorkloadInstanceName::new(&WorkloadName::new(w).unwrap(), &AgentName::new(agent).unwrap(), "c")
    }

    fn requester(conn: ConnId, id: &str) -> Requester {
        Requester { conn, request_id: id.into() }
    }

    #[test]
    fn log_campaign_splits_by_agent_and_ends_with_the_last_stop() {
        let mut c = LogCampaigns::default();
        let (a, b) = (name("a", "A"), name("b", "B"));
        let (key, by_agent) = c.start(requester(1, "r"), &[a.clone(), b.clone()]);
        assert_eq!(key, "1@r");
        assert_eq!(by_agent["A"], vec![a.clone()]);
        assert_eq!(by_agent["B"], vec![b.clone()]);
        assert_eq!(c.requester(&key), Some(&requester(1, "r")));
        assert_eq!(c.stopped(&key, &a), Some(requester(1, "r")));
        assert_eq!(c.stopped(&key, &a), None, "a second stop is ignored");
        assert_eq!(c.stopped(&key, &b), Some(requester(1, "r")));
        assert_eq!(c.requester(&key), None, "ended");
    }

    #[test]
    fn log_campaigns_end_on_cancel_requester_loss_and_agent_loss() {
        let mut c = LogCampaigns::default();
        let (a, b) = (name("a", "A"), name("b", "B"));
        c.start(requester(1, "r"), &[a.clone(), b.clone()]);
        let (key, agents) = c.cancel(&requester(1, "r")).unwrap();
        assert_eq!((key.as_str(), agents.into_iter().collect::<Vec<_>>()), ("1@r", vec!["A".into(), "B".into()]));
        assert!(c.cancel(&requester(1, "r")).is_none());

        c.start(requester(2, "x"), std::slice::from_ref(&a));
        c.start(requester(3, "y"), std::slice::from_ref(&b));
        assert_eq!(c.requester_gone(2).len(), 1);
        assert!(c.requester("2@x").is_none());
        assert_eq!(c.agent_gone("B"), vec![(requester(3, "y"), b)]);
        assert!(c.requester("3@y").is_none());
    }
}
