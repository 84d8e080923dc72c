//! Event subscriptions (CompleteStateRequest with `subscribeForEvents`):
//! who subscribed with which field masks, and the event each subscriber
//! gets for a change: the altered fields its masks select (computed by
//! [`state_diff`](crate::events::state_diff) as Ankaios computes them) and the
//! complete state under them.

pub mod sections;
pub mod snapshot;
pub mod state_diff;

use std::collections::BTreeMap;

use ank_common::field_mask;
use ank_common::messages::AlteredFields;
use serde_json::Value;

use crate::connections::ConnId;

/// One event for one subscriber.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub conn: ConnId,
    pub request_id: String,
    pub complete_state: Value,
    pub altered_fields: AlteredFields,
}

/// The open subscriptions: (connection, request id) -> field masks.
#[derive(Debug, Default)]
pub struct EventSubscriptions {
    subs: BTreeMap<(ConnId, String), Vec<String>>,
}

impl EventSubscriptions {
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Opens (or with the same id replaces) a subscription.
    pub fn add(&mut self, conn: ConnId, request_id: String, masks: Vec<String>) {
        self.subs.insert((conn, request_id), masks);
    }

    /// The parts of the complete state the subscriptions' masks can see.
    pub fn sections(&self) -> sections::Sections {
        let mut out = sections::Sections::default();
        self.subs.values().for_each(|masks| out.add(masks));
        out
    }

    /// How many subscriptions connection `conn` has open.
    pub fn count(&self, conn: ConnId) -> usize {
        self.subs.keys().filter(|(c, _)| *c == conn).count()
    }

    /// Whether `conn` has a subscription with `request_id` open.
    pub fn has(&self, conn: ConnId, request_id: &str) -> bool {
        self.subs.contains_key(&(conn, request_id.to_owned()))
    }

    /// Ends one subscription; false if there was none.
    pub fn remove(&mut self, conn: ConnId, request_id: &str) -> bool {
        self.subs.remove(&(conn, request_id.to_owned())).is_some()
    }

    /// Ends the subscriptions of one connection whose request ids `drop`
    /// selects (`|_| true` for a closed connection).
    pub fn remove_where(&mut self, conn: ConnId, mut drop: impl FnMut(&str) -> bool) {
        self.subs.retain(|(c, id), _| *c != conn || !drop(id));
    }

    /// The events that the change from `old` to `new` (both
    /// [`comparable`](crate::events::state_diff::comparable) trees) gives each
    /// subscriber; `current` is the complete state after the change, from
    /// which each event carries the altered fields' values.
    pub fn events(&self, old: &Value, new: &Value, current: &Value) -> Vec<Event> {
        let differences = state_diff::differences(old, new);
        if differences.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for ((conn, request_id), masks) in &self.subs {
            let altered_fields = differences.altered_fields(masks);
            if altered_fields.is_empty() {
                continue;
            }
            let complete_state = event_state(current, &altered_fields);
            out.push(Event { conn: *conn, request_id: request_id.clone(), complete_state, altered_fields });
        }
        out
    }
}

/// What an event carries, as in Ankaios: the complete state under the
/// altered fields, with the desired state's apiVersion if any of them is
/// in the desired state, and an execution state's `state` and `subState`
/// together.
fn event_state(current: &Value, altered: &AlteredFields) -> Value {
    let mut masks: Vec<String> =
        altered.added_fields.iter().chain(&altered.removed_fields).chain(&altered.updated_fields).cloned().collect();
    for root in ["desiredState", "effectiveState"] {
        if masks.iter().any(|m| m.starts_with(root)) {
            masks.push(format!("{root}.apiVersion"));
        }
    }
    // The state and subState of an execution state come together. A field
    // that is no valid mask (a key "") is left out, never widened.
    let any = !masks.is_empty();
    let masks: Vec<String> = masks
        .iter()
        .filter_map(|m| ank_common::mask_path::MaskPath::parse(m).ok())
        .flat_map(|m| field_mask::read_masks(&m))
        .map(|m| m.to_string())
        .collect();
    if any && masks.is_empty() {
        return Value::Object(Default::default());
    }
    field_mask::filter(current, &masks)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn subscribers_get_their_altered_fields_and_the_values_under_them() {
        let old = json!({"desiredState": {"apiVersion": "v1", "workloads": {}},
            "workloadStates": {"A": {"w": {"id": {"state": "Pending", "subState": "Starting", "additionalInfo": "x"}}}}});
        let new = json!({"desiredState": {"apiVersion": "v1", "workloads": {"n": {"agent": "A"}}},
            "workloadStates": {"A": {"w": {"id": {"state": "Pending", "subState": "Starting", "additionalInfo": "y"}}}}});
        let mut subs = EventSubscriptions::default();
        subs.add(1, "all".into(), vec![]);
        subs.add(2, "agents".into(), vec!["desiredState.workloads.*.agent".into()]);
        subs.add(3, "quiet".into(), vec!["desiredState.configs".into()]);
        let events = subs.events(&old, &new, &new);
        assert_eq!(events.len(), 2, "{events:?}");
        let all = &events[0];
        assert_eq!(all.altered_fields.added_fields, ["desiredState.workloads.n"]);
        assert_eq!(all.altered_fields.updated_fields, ["workloadStates.A.w.id.additionalInfo"]);
        assert_eq!(
            all.complete_state,
            json!({"desiredState": {"apiVersion": "v1", "workloads": {"n": {"agent": "A"}}},
                "workloadStates": {"A": {"w": {"id": {"additionalInfo": "y"}}}}})
        );
        // Such an event goes on the wire as it is (no state enum).
        ank_common::convert::complete_state_from_json(&all.complete_state).unwrap();
        let agents = &events[1];
        assert_eq!(agents.altered_fields.added_fields, ["desiredState.workloads.n.agent"]);
        assert!(agents.altered_fields.updated_fields.is_empty());
    }

    #[test]
    fn an_event_state_carries_state_and_sub_state_together() {
        let current = json!({"workloadStates": {"A": {"w": {"id": {"state": "Running", "subState": "Ok", "additionalInfo": ""}}}}});
        let altered =
            AlteredFields { updated_fields: vec!["workloadStates.A.w.id.subState".into()], ..Default::default() };
        assert_eq!(
            event_state(&current, &altered),
            json!({"workloadStates": {"A": {"w": {"id": {"state": "Running", "subState": "Ok"}}}}})
        );
    }

    #[test]
    fn subscriptions_end_by_id_or_by_connection() {
        let mut subs = EventSubscriptions::default();
        subs.add(1, "r1".into(), vec![]);
        subs.add(1, "wl@r2".into(), vec![]);
        subs.add(2, "r3".into(), vec![]);
        assert!(subs.remove(1, "r1"));
        assert!(!subs.remove(1, "r1"));
        subs.remove_where(1, |id| id.starts_with("wl@"));
        subs.remove_where(2, |_| true);
        assert!(subs.is_empty());
    }
}
