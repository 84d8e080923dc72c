//! What commanders subscribed to: event subscriptions and log campaigns,
//! and how many of each one connection may keep open. Around a change that
//! may alter the complete state, the streams take the sections their
//! subscribers see before it ([`Streams::before`]) and hand out the events
//! it caused after it ([`Streams::events_after`]).

use ank_common::messages::{FromServer, Response, ResponseContent};
use serde_json::Value;

use crate::connections::{Connections, Outbox};
use crate::desired_state::DesiredState;
use crate::events::EventSubscriptions;
use crate::events::sections::Sections;
use crate::events::snapshot::StatesSnapshot;
use crate::jobs::JobEngine;
use crate::logs::campaigns::LogCampaigns;
use crate::requests;
use crate::workload_states::WorkloadStateStore;

/// Event subscriptions and log campaigns, and their limits.
#[derive(Default)]
pub(super) struct Streams {
    pub(super) events: EventSubscriptions,
    /// The workload states as the events last compared them.
    pub(super) states_seen: StatesSnapshot,
    pub(super) logs: LogCampaigns,
    pub(super) limits: crate::stream_limits::StreamLimits,
}

/// What the events read of the complete state but its workload states.
pub(super) struct Watched<'a> {
    pub(super) desired: &'a DesiredState,
    pub(super) conns: &'a Connections,
    pub(super) jobs: &'a JobEngine,
}

impl Watched<'_> {
    /// The complete state's `sections` but its workload states, as Ankaios
    /// compares complete states for events.
    fn comparable_tree(&self, sections: Sections) -> (Value, Value) {
        let tree = requests::complete_state_sections(self.desired, self.conns, self.jobs, sections);
        let comparable = crate::events::state_diff::comparable(&tree, |agent| self.conns.status_reported(agent));
        (tree, comparable)
    }
}

/// The sections the subscribers saw before a change.
pub(super) struct Before {
    sections: Sections,
    tree: Value,
}

impl Streams {
    /// Before a change: what the subscribers see of the complete state;
    /// `None` while nobody subscribed.
    pub(super) fn before(&mut self, watched: &Watched<'_>, states: &mut WorkloadStateStore) -> Option<Before> {
        if self.events.is_empty() {
            self.states_seen.invalidate();
            return None;
        }
        let sections = self.events.sections();
        let (_, tree) = watched.comparable_tree(sections);
        if sections.workload_states {
            self.states_seen.refresh(states);
        } else {
            self.states_seen.invalidate();
        }
        Some(Before { sections, tree })
    }

    /// After a change: the events it caused, one per subscriber whose
    /// masks see an altered field. The workload states are compared only
    /// for the agents whose states the change touched (the snapshot keeps
    /// the others').
    pub(super) fn events_after(
        &mut self,
        before: Before,
        watched: &Watched<'_>,
        states: &mut WorkloadStateStore,
    ) -> Outbox {
        let Before { sections, tree: mut before } = before;
        let (mut current, mut after) = watched.comparable_tree(sections);
        if sections.workload_states {
            let states = self.states_seen.advance(states);
            for (tree, part) in
                [(&mut before, states.before), (&mut after, states.after), (&mut current, states.current)]
            {
                if let Some(root) = tree.as_object_mut() {
                    root.insert("workloadStates".to_owned(), Value::Object(part));
                }
            }
        }
        let mut out = Outbox::default();
        for event in self.events.events(&before, &after, &current) {
            let content = ResponseContent::Event {
                complete_state: Box::new(event.complete_state),
                altered_fields: event.altered_fields,
            };
            out.send(event.conn, FromServer::Response(Response { request_id: event.request_id, content }));
        }
        out
    }
}
