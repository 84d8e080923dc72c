//! Tests of the listing taken at the agent's start: the first hello uses it,
//! a runtime event in between or a reconnect makes the hello list again, and
//! a slow runtime does not keep the agent from connecting.

use std::time::Duration;

use ank_common::ExecutionState;
use ank_common::StateKind;
use ank_common::execution_state::Failed;
use tokio::time::Instant;

use super::tests::{harness_with, spec};
use crate::runtime_connectors::fake::{FakeCall, FakeRuntime};

const LIMIT: Duration = Duration::from_secs(2);

fn lists(calls: &[FakeCall]) -> usize {
    calls.iter().filter(|c| matches!(c, FakeCall::List)).count()
}

#[tokio::test]
// [utest->swdd~agent-existing-workloads-finds-list~1]
// [utest->swdd~agent-existing-workloads-resume-existing~2]
async fn start_listing_is_done_before_the_first_listing_returns_and_the_first_hello_uses_it() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    let mut h = harness_with(fake).await;
    h.rm.first_listing(LIMIT).await;
    assert_eq!(h.fake.calls(), vec![FakeCall::List], "the runtimes are listed before the agent connects");

    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running(), "resumed from the start listing");
    assert_eq!(h.fake.calls(), vec![FakeCall::List], "the first hello lists nothing again and creates nothing");

    // A reconnect's hello lists again: the start listing serves only once.
    h.rm.server_hello(vec![a.clone()]).await;
    tokio::time::timeout(Duration::from_secs(5), async {
        while lists(&h.fake.calls()) < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the second hello lists the runtimes again");
    assert!(h.fake.created().is_empty(), "{:?}", h.fake.calls());
}

#[tokio::test]
async fn a_runtime_event_after_the_start_listing_makes_the_first_hello_list_again() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    let mut h = harness_with(fake).await;
    h.rm.first_listing(LIMIT).await;
    // The container exits after the listing, before the server's hello.
    h.fake.exit(&a.instance_name, 3).await;

    h.rm.server_hello(vec![a.clone()]).await;
    let state = h.next_of(&a.instance_name).await;
    assert_eq!(state.kind, StateKind::Failed(Failed::ExecFailed), "the exit is not lost: {state:?}");
    assert_eq!(lists(&h.fake.calls()), 2, "{:?}", h.fake.calls());
    assert!(h.fake.created().is_empty(), "a workload that ran to its end is not started again");
}

#[tokio::test(start_paused = true)]
async fn a_slow_start_listing_lets_the_agent_connect_after_the_limit_and_the_hello_waits_for_it() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    fake.delay_lists(Duration::from_secs(5));
    let mut h = harness_with(fake).await;
    let began = Instant::now();
    h.rm.first_listing(LIMIT).await;
    assert_eq!(began.elapsed(), LIMIT, "the agent connects after the limit at the latest");
    assert!(h.fake.calls().is_empty(), "the listing still runs");

    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
    assert_eq!(began.elapsed(), Duration::from_secs(5), "the hello waits for the listing under way");
    assert_eq!(h.fake.calls(), vec![FakeCall::List], "one listing, not two");
}

#[tokio::test(start_paused = true)]
async fn a_quick_start_listing_lets_the_agent_connect_as_soon_as_it_is_done() {
    let fake = FakeRuntime::new();
    fake.delay_lists(Duration::from_millis(300));
    let h = harness_with(fake).await;
    let began = Instant::now();
    h.rm.first_listing(LIMIT).await;
    assert_eq!(began.elapsed(), Duration::from_millis(300));
}
