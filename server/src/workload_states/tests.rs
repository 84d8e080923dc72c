use ank_common::conditions::{RuntimeHealth, agent_conditions};

use super::*;

fn name(w: &str, a: &str) -> WorkloadInstanceName {
    WorkloadInstanceName { workload_name: w.into(), agent_name: a.into(), id: "1".into() }
}

/// A report of this orchestrator's agents at `generation`.
fn report(n: &WorkloadInstanceName, state: ExecutionState, generation: u64) -> WorkloadState {
    let conditions = agent_conditions(&state, generation, &RuntimeHealth::Reachable);
    WorkloadState::new(n.clone(), state).with_status(InstanceStatus {
        observed_generation: generation,
        conditions,
        ..Default::default()
    })
}

#[test]
fn state_store_records_removes_and_disconnects() {
    let mut s = WorkloadStateStore::default();
    assert!(s.record(&WorkloadState::new(name("w", "A"), ExecutionState::running())));
    assert!(!s.record(&WorkloadState::new(name("w", "A"), ExecutionState::running())));
    s.record(&WorkloadState::new(name("v", "B"), ExecutionState::running()));
    let changed = s.mark_agent_disconnected("A", |_| true);
    assert_eq!(changed.len(), 1);
    assert_eq!(s.map_with_events()["A"]["w"]["1"].state, ExecutionState::agent_disconnected());
    assert_eq!(s.all_except(Some("A")).len(), 1);
    assert!(s.contains(&name("w", "A")));
    assert!(s.record(&WorkloadState::new(name("w", "A"), ExecutionState::removed())));
    assert!(!s.map_with_events().contains_key("A"));
    assert!(!s.contains(&name("w", "A")));
}

// [test of feature H2]
#[tokio::test]
async fn stale_and_future_reports_are_dropped() {
    let mut s = WorkloadStateStore::default();
    let w = name("w", "A");
    s.record(&WorkloadState::new(w.clone(), ExecutionState::pending_initial()));
    assert_eq!(s.ingest(&report(&w, ExecutionState::running(), 2), Some(2)), Ingest::Accepted(true));
    assert_eq!(s.ingest(&report(&w, ExecutionState::failed("late"), 1), Some(2)), Ingest::Stale);
    assert_eq!(s.map_with_events()["A"]["w"]["1"].state, ExecutionState::running());
    assert_eq!(s.ingest(&report(&w, ExecutionState::failed("ahead"), 3), Some(2)), Ingest::Future);
    assert_eq!(s.map_with_events()["A"]["w"]["1"].state, ExecutionState::running());
    // A report lacking Health is refused, naming it.
    let mut partial = report(&w, ExecutionState::failed("x"), 2);
    partial.status.conditions.retain(|c| c.kind != ConditionType::Health);
    assert_eq!(s.ingest(&partial, Some(2)), Ingest::Invalid(ConditionType::Health));
    assert_eq!(s.status(&w).unwrap().status_of(ConditionType::Ready), ConditionStatus::True);
}

// [test of feature H3]
#[tokio::test]
async fn a_new_instance_inherits_availability_and_is_not_ready_until_it_is_available() {
    let mut s = WorkloadStateStore::default();
    let old = name("w", "A");
    s.record(&WorkloadState::new(old.clone(), ExecutionState::pending_initial()));
    s.set_generation(&old, 1);
    s.ingest(&report(&old, ExecutionState::running(), 1), Some(1));
    let st = s.status(&old).unwrap();
    assert_eq!(
        (st.status_of(ConditionType::Available), st.status_of(ConditionType::Ready)),
        (ConditionStatus::True, ConditionStatus::True)
    );
    // Generation 2 is a new instance (new image).
    let new = WorkloadInstanceName { id: "2".into(), ..old.clone() };
    let mut pending = WorkloadState::new(new.clone(), ExecutionState::pending_initial());
    pending.status.generation = 2;
    s.record(&pending);
    let st = s.status(&new).unwrap();
    let available = st.condition(ConditionType::Available).unwrap();
    assert_eq!((available.status, available.observed_generation), (ConditionStatus::True, 1));
    assert_eq!(st.condition(ConditionType::Ready).unwrap().reason, "GenerationPending");
    // Starting is Unknown: not news.
    s.ingest(
        &report(&new, ExecutionState::new(StateKind::Pending(ank_common::execution_state::Pending::Starting)), 2),
        Some(2),
    );
    assert_eq!(s.status(&new).unwrap().condition(ConditionType::Available).unwrap().observed_generation, 1);
    // The pull fails after the old one is gone: Available=False at 2.
    s.remove(&old);
    s.ingest(
        &report(
            &new,
            ExecutionState::with_info(
                StateKind::Pending(ank_common::execution_state::Pending::StartingFailed),
                "no image",
            ),
            2,
        ),
        Some(2),
    );
    let st = s.status(&new).unwrap();
    assert_eq!(st.status_of(ConditionType::Available), ConditionStatus::False);
    assert_eq!(st.condition(ConditionType::Ready).unwrap().reason, "NotAvailable");
}

// [test of feature H5]
#[tokio::test(start_paused = true)]
async fn an_unknown_report_does_not_confirm_availability() {
    let mut s = WorkloadStateStore::default();
    let w = name("w", "A");
    s.record(&WorkloadState::new(w.clone(), ExecutionState::pending_initial()));
    s.ingest(&report(&w, ExecutionState::running(), 1), Some(1));
    let confirmed = s.timing(&w).unwrap().confirmed;
    let updated = s.status(&w).unwrap().condition(ConditionType::Available).unwrap().last_updated_time.clone();
    tokio::time::advance(std::time::Duration::from_secs(5)).await;
    let stopping = ExecutionState::new(StateKind::Stopping(ank_common::execution_state::Stopping::Stopping));
    s.ingest(&report(&w, stopping, 1), Some(1));
    let st = s.status(&w).unwrap();
    assert_eq!(st.status_of(ConditionType::Available), ConditionStatus::True);
    assert_eq!(st.condition(ConditionType::Available).unwrap().last_updated_time, updated);
    assert_eq!(s.timing(&w).unwrap().confirmed, confirmed);
}

#[tokio::test]
async fn an_ankaios_report_gets_conditions_from_its_state() {
    let mut s = WorkloadStateStore::default();
    let w = name("w", "A");
    s.record(&WorkloadState::new(w.clone(), ExecutionState::pending_initial()));
    s.set_generation(&w, 4);
    assert_eq!(s.ingest(&WorkloadState::new(w.clone(), ExecutionState::running()), Some(4)), Ingest::Accepted(true));
    let st = s.status(&w).unwrap();
    assert_eq!(st.status_of(ConditionType::Ready), ConditionStatus::True);
    assert_eq!(st.observed_generation, 0, "an Ankaios agent does not say");
}

// [test of feature H7]
#[tokio::test]
async fn deleted_instances_of_a_lost_agent_show_agent_disconnected_as_in_ankaios() {
    let mut s = WorkloadStateStore::default();
    let (keep, gone) = (name("keep", "A"), name("gone", "A"));
    s.record(&WorkloadState::new(keep.clone(), ExecutionState::running()));
    s.record(&WorkloadState::new(gone.clone(), ExecutionState::running()));
    let changed = s.mark_agent_disconnected("A", |n| n.workload_name == "keep");
    assert_eq!(changed.len(), 2);
    assert_eq!(s.map_with_events()["A"]["keep"]["1"].state, ExecutionState::agent_disconnected());
    let waiting = &s.map_with_events()["A"]["gone"]["1"];
    assert_eq!(waiting.state, ExecutionState::agent_disconnected(), "Ankaios shows such a row as AgentDisconnected");
    assert_eq!(waiting.status.condition(ConditionType::Ready).unwrap().reason, "AgentDisconnected");
    let health = waiting.status.condition(ConditionType::Health).unwrap();
    assert_eq!(health.reason, "AgentDisconnected");
    assert_eq!(health.message, "deleted; removed once agent 'A' is back and confirms", "our condition tells it apart");
}

// [test of feature K8: agent entries and server events meet in one ring per workload]
#[tokio::test(start_paused = true)]
async fn events_from_agents_and_the_server_merge_per_workload() {
    use ank_common::workload_events::{EventKind, WorkloadEvent};
    let mut s = WorkloadStateStore::default();
    let n = name("w", "A");
    let mut r =
        report(&n, ExecutionState::new(StateKind::Pending(ank_common::execution_state::Pending::QuotaBlocked)), 1);
    r.status.events = vec![WorkloadEvent {
        kind: EventKind::QuotaBlocked,
        reason: "agent_A 2/2".into(),
        count: 3,
        first_seen: "t1".into(),
        last: "t3".into(),
    }];
    assert_eq!(s.ingest(&r, Some(1)), Ingest::Accepted(true));
    r.status.events[0].count = 5;
    assert_eq!(s.ingest(&r, Some(1)), Ingest::Accepted(true), "a grown count is news");
    s.record_event("w", EventKind::AgentDisconnected, "agent 'A' disconnected");
    let shown = &s.map_with_events()["A"]["w"]["1"].status.events;
    assert_eq!(shown.len(), 2);
    assert_eq!((shown[0].kind, shown[0].count), (EventKind::QuotaBlocked, 5));
    s.retain_events(|w| w != "w");
    assert!(s.map_with_events()["A"]["w"]["1"].status.events.is_empty());
}

// Issue 26, bug 1: conditions follow the execution state. An instance
// without a container is not Ready, whatever an earlier report said; also
// when the report comes from an agent that still sends Unknown for it.
#[tokio::test]
async fn a_preempted_quota_blocked_postponed_or_canceled_instance_is_not_ready() {
    use ank_common::execution_state::Pending;
    for (pending, reason) in [
        (Pending::Preempted, "Preempted"),
        (Pending::QuotaBlocked, "QuotaBlocked"),
        (Pending::Postponed, "Postponed"),
        (Pending::Canceled, "Canceled"),
    ] {
        let mut s = WorkloadStateStore::default();
        let w = name("w", "A");
        s.record(&WorkloadState::new(w.clone(), ExecutionState::pending_initial()));
        s.set_generation(&w, 1);
        s.ingest(&report(&w, ExecutionState::running(), 1), Some(1));
        assert_eq!(s.status(&w).unwrap().status_of(ConditionType::Ready), ConditionStatus::True);

        s.ingest(&report(&w, ExecutionState::new(StateKind::Pending(pending)), 1), Some(1));
        let st = s.status(&w).unwrap();
        let statuses =
            [ConditionType::Applied, ConditionType::Available, ConditionType::Ready].map(|t| st.status_of(t));
        assert_eq!(statuses, [ConditionStatus::False; 3], "{pending:?}");
        assert_eq!(st.condition(ConditionType::Ready).unwrap().reason, reason);

        // An older agent's report, whose conditions say Unknown.
        let mut s = WorkloadStateStore::default();
        s.record(&WorkloadState::new(w.clone(), ExecutionState::pending_initial()));
        s.set_generation(&w, 1);
        s.ingest(&report(&w, ExecutionState::running(), 1), Some(1));
        let mut old = report(&w, ExecutionState::new(StateKind::Pending(pending)), 1);
        for c in &mut old.status.conditions {
            if c.kind != ConditionType::Health {
                c.status = ConditionStatus::Unknown;
            }
        }
        s.ingest(&old, Some(1));
        assert_eq!(s.status(&w).unwrap().status_of(ConditionType::Ready), ConditionStatus::False, "{pending:?}");
    }
}

// Issue 26: a NotScheduled instance is not Ready, and says why.
#[test]
fn a_not_scheduled_instance_is_not_ready_and_says_why() {
    let mut s = WorkloadStateStore::default();
    let w = WorkloadInstanceName { workload_name: "w".into(), agent_name: "".into(), id: "1".into() };
    let why = "1 agent: 1 label arch = arm64 mismatch (agent_A)";
    s.record(&WorkloadState::new(w.clone(), ExecutionState::with_info(StateKind::NotScheduled, why)));
    let ready = s.status(&w).unwrap().condition(ConditionType::Ready).unwrap().clone();
    assert_eq!(
        (ready.status, ready.reason.as_str(), ready.message.as_str()),
        (ConditionStatus::False, "NotScheduled", why)
    );
    // The -o wide table's AVAILABLE is filled too.
    let st = s.status(&w).unwrap();
    assert_eq!(
        (st.status_of(ConditionType::Applied), st.status_of(ConditionType::Available)),
        (ConditionStatus::False, ConditionStatus::False)
    );
}
