//! Unit tests of the [`InstanceTable`]: what passes to the server, how it is
//! stamped, and what is forgotten when.

use ank_common::execution_state::Stopping;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::workload_events::EventKind;
use ank_common::{AgentName, WorkloadName};

use super::*;

const AGENT: &str = "agent_A";

fn spec(name: &str, generation: u64) -> WorkloadSpec {
    let wl = Workload { agent: AGENT.into(), runtime: "podman".into(), ..Default::default() };
    let mut s = WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(AGENT).unwrap(), wl);
    s.generation = generation;
    s
}

fn state(n: &WorkloadInstanceName, s: ExecutionState) -> WorkloadState {
    WorkloadState::new(n.clone(), s)
}

fn ok() -> RuntimeHealth {
    RuntimeHealth::Reachable
}

fn event(n: &WorkloadInstanceName, reason: &str) -> EventReport {
    EventReport { instance_name: n.clone(), kind: EventKind::Restarted, reason: reason.into() }
}

#[test]
// [utest->swdd~agent-stores-workload-states-of-its-workloads~1]
// [utest->swdd~agent-manager-hysteresis_on-workload-states-of-its-workloads~1]
fn accepted_states_pass_the_hysteresis_and_carry_their_generation() {
    let mut t = InstanceTable::new(AGENT);
    let s = spec("web", 3);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    let first = t.accept(state(&n, ExecutionState::running()), &ok()).expect("a first state passes");
    assert_eq!(first.status.observed_generation, 3);
    assert_eq!(t.states().state_of("web"), Some(&ExecutionState::running()));
    assert_eq!(t.accept(state(&n, ExecutionState::running()), &ok()), None, "a repeat is dropped");
    let stopping = ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime));
    assert!(t.accept(state(&n, stopping.clone()), &ok()).is_some());
    assert_eq!(t.accept(state(&n, ExecutionState::running()), &ok()), None, "a lagging observation is dropped");
    assert_eq!(t.states().state_of("web"), Some(&stopping));
    assert_eq!(t.counts(), WorkloadCounts { workloads: 1, running: 0 });
}

#[test]
fn the_first_report_after_a_workload_message_passes_even_as_a_repeat() {
    let mut t = InstanceTable::new(AGENT);
    let s = spec("web", 1);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    // The server sends the same spec again (a resync): it gets its answer.
    assert!(t.added(std::slice::from_ref(&s)).is_empty(), "same generation: nothing renumbered");
    assert!(t.accept(state(&n, ExecutionState::running()), &ok()).is_some());
    assert_eq!(t.accept(state(&n, ExecutionState::running()), &ok()), None, "only the first one");
}

#[test]
fn a_new_generation_of_a_stated_instance_is_reported_again() {
    let mut t = InstanceTable::new(AGENT);
    let n = spec("web", 1).instance_name;
    t.hello(&[spec("web", 1)]);
    t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    let renumbered = t.hello(&[spec("web", 2)]);
    assert_eq!(renumbered, vec![n.clone()]);
    let again = t.reports(renumbered, &ok());
    assert_eq!(again[0].status.observed_generation, 2);
    assert_eq!(again[0].execution_state, ExecutionState::running());
}

#[test]
fn a_deleted_instance_forgets_its_generation_and_events_once_removed() {
    let mut t = InstanceTable::new(AGENT);
    let s = spec("web", 4);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(t.event(event(&n, "restartPolicy ALWAYS"), "t1"), Some(n.clone()));
    t.deleted([n.clone()]);
    let removed = t.accept(state(&n, ExecutionState::removed()), &ok()).expect("removed passes");
    assert_eq!(removed.status.observed_generation, 4, "stamped before it is forgotten");
    assert_eq!(removed.status.events.len(), 1, "the unsent event goes with it");
    assert_eq!(t.states().state_of("web"), None);
    assert_eq!(t.counts(), WorkloadCounts::default());
    // Added again later: a fresh record, the old ring is gone.
    t.added(std::slice::from_ref(&s));
    t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert!(t.all().iter().all(|i| !t.has_unsent(i)), "no events left of the deleted workload");
}

#[test]
fn a_removal_that_is_not_a_delete_keeps_the_generation() {
    let mut t = InstanceTable::new(AGENT);
    let s = spec("web", 7);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    t.accept(state(&n, ExecutionState::removed()), &ok()).unwrap();
    let back = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(back.status.observed_generation, 7);
}

#[test]
// [utest->swdd~agent-manager-stores-all-workload-states~1]
fn other_agents_states_are_stored_and_echoes_of_own_ones_ignored() {
    let mut t = InstanceTable::new(AGENT);
    let own = spec("web", 1).instance_name;
    let other =
        WorkloadInstanceName::new(&WorkloadName::new("db").unwrap(), &AgentName::new("agent_B").unwrap(), "cfg");
    t.accept(state(&own, ExecutionState::running()), &ok()).unwrap();
    t.others(&[state(&other, ExecutionState::succeeded()), state(&own, ExecutionState::pending_initial())]);
    assert_eq!(t.states().state_of("db"), Some(&ExecutionState::succeeded()));
    assert_eq!(t.states().state_of("web"), Some(&ExecutionState::running()), "the own state stays");
    assert_eq!(t.counts(), WorkloadCounts { workloads: 1, running: 1 }, "others are not counted");
}

#[test]
fn events_merge_and_a_resend_brings_the_whole_ring() {
    let mut t = InstanceTable::new(AGENT);
    let n = spec("web", 1).instance_name;
    assert_eq!(t.event(event(&n, "exit"), "t1"), None, "no state yet: it waits for the first report");
    t.event(event(&n, "exit"), "t2");
    let first = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(first.status.events.len(), 1, "merged by kind and reason");
    assert_eq!(first.status.events[0].count, 2);
    assert!(!t.has_unsent(&n));
    let all = t.all();
    assert_eq!(all, vec![n.clone()]);
    let again = t.reports(all, &ok());
    assert_eq!(again[0].status.events.len(), 1, "a server that restarted gets the ring");
}

#[test]
fn conditions_follow_the_runtime_health() {
    let mut t = InstanceTable::new(AGENT);
    let n = spec("web", 1).instance_name;
    let up = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    let down = t.reports(vec![n], &RuntimeHealth::Unreachable("runtime 'podman': gone".into()));
    assert_ne!(up.status.conditions, down[0].status.conditions);
}

fn available(w: &WorkloadState) -> (ank_common::conditions::ConditionStatus, String, String) {
    let c = w.status.condition(ConditionType::Available).expect("an Available condition");
    (c.status, c.reason.clone(), c.message.clone())
}

// [test of feature H6]
#[test]
fn a_readiness_probe_drives_available_while_running_and_a_verdict_is_news() {
    use ank_common::conditions::ConditionStatus::{False, True, Unknown};
    let mut t = InstanceTable::new(AGENT);
    let s = spec("web", 2);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    // Announced before the Running state: that is Unknown, not True.
    assert_eq!(t.readiness(&n, Some(Readiness::Unknown)), None, "not running yet: nothing to send");
    let running = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(available(&running).0, Unknown);
    assert_eq!(available(&running).1, "ReadinessProbePending");
    assert_eq!(running.execution_state, ExecutionState::running(), "Ankaios' state stays Running(Ok)");
    // A verdict changes no execution state, but it is sent.
    assert_eq!(t.readiness(&n, Some(Readiness::Ready)), Some(n.clone()));
    assert!(t.has_unsent(&n));
    let ready = t.reports(vec![n.clone()], &ok()).remove(0);
    assert_eq!(available(&ready), (True, "Running".into(), "readinessProbe passed".into()));
    assert!(!t.has_unsent(&n));
    assert_eq!(t.readiness(&n, Some(Readiness::Ready)), None, "the same verdict is no news");
    t.readiness(&n, Some(Readiness::NotReady("HTTP GET 127.0.0.1:8080/: HTTP/1.1 503".into())));
    let failing = t.reports(vec![n.clone()], &ok()).remove(0);
    assert_eq!(
        available(&failing),
        (False, "ReadinessProbeFailed".into(), "HTTP GET 127.0.0.1:8080/: HTTP/1.1 503".into())
    );
    assert_eq!(ank_common::conditions::ready(&failing.status, 2).reason, "NotAvailable");
    // The run ends: its verdict goes with it; the next run starts Unknown.
    let failed = ExecutionState::new(StateKind::Failed(ank_common::execution_state::Failed::ExecFailed));
    let f = t.accept(state(&n, failed), &ok()).unwrap();
    assert_eq!(available(&f).0, False, "a failed container is not available, whatever the probe said");
    let again = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(available(&again).0, Unknown);
    // Without a readiness probe Available follows the state, as always.
    t.readiness(&n, None);
    let plain = t.reports(vec![n.clone()], &ok()).remove(0);
    assert_eq!(available(&plain).0, True);
}

#[test]
fn without_a_readiness_probe_the_conditions_are_exactly_the_states() {
    let mut t = InstanceTable::new(AGENT);
    let s = spec("plain", 1);
    let n = s.instance_name.clone();
    t.added(std::slice::from_ref(&s));
    let r = t.accept(state(&n, ExecutionState::running()), &ok()).unwrap();
    assert_eq!(r.status.conditions, conditions::agent_conditions(&ExecutionState::running(), 1, &ok()));
}
