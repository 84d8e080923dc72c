//! Tests of the listing started at the agent's start: the first hello uses
//! it (waiting for it while it runs), a runtime event in between or a
//! reconnect makes the hello list again.

use std::time::Duration;

use ank_common::ExecutionState;
use tokio::time::Instant;

use super::tests::{Harness, harness_with, spec};
use crate::runtime_connectors::fake::{FakeCall, FakeRuntime};

fn lists(calls: &[FakeCall]) -> usize {
    calls.iter().filter(|c| matches!(c, FakeCall::List)).count()
}

/// Waits until the fake was listed `n` times in all.
async fn listed(h: &Harness, n: usize) {
    tokio::time::timeout(Duration::from_secs(5), async {
        while lists(&h.fake.calls()) < n {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not listed {n} times: {:?}", h.fake.calls()));
}

#[tokio::test]
// [utest->swdd~agent-existing-workloads-finds-list~1]
// [utest->swdd~agent-existing-workloads-resume-existing~2]
async fn the_runtimes_are_listed_at_the_start_and_the_first_hello_uses_that_listing() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    let mut h = harness_with(fake).await;
    listed(&h, 1).await;

    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running(), "resumed from the start listing");
    assert_eq!(h.fake.calls(), vec![FakeCall::List], "the first hello lists nothing again and creates nothing");

    // A reconnect's hello lists again: the start listing serves only once.
    h.rm.server_hello(vec![a.clone()]).await;
    listed(&h, 2).await;
    assert!(h.fake.created().is_empty(), "{:?}", h.fake.calls());
}

#[tokio::test]
async fn a_runtime_event_after_the_start_listing_makes_the_first_hello_list_again() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    let mut h = harness_with(fake).await;
    listed(&h, 1).await;
    // The container exits after the listing, before the server's hello.
    h.fake.exit(&a.instance_name, 3).await;

    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    assert_eq!(lists(&h.fake.calls()), 2, "{:?}", h.fake.calls());
    // The exit is not lost: the new listing shows the container failed, so
    // it is replaced, as Ankaios does (a running one would be taken over).
    assert_eq!(h.fake.deleted(), vec![a.instance_name.clone()]);
    assert_eq!(h.fake.created(), vec![a.instance_name.clone()]);
}

#[tokio::test(start_paused = true)]
async fn a_hello_during_a_slow_start_listing_waits_for_it_instead_of_listing_again() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    fake.delay_lists(Duration::from_secs(5));
    let began = Instant::now();
    let mut h = harness_with(fake).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(h.fake.calls().is_empty(), "the listing still runs");

    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
    assert_eq!(began.elapsed(), Duration::from_secs(5), "the hello took the start listing when it ended");
    assert_eq!(h.fake.calls(), vec![FakeCall::List], "one listing, not two");
}

#[tokio::test(start_paused = true)]
async fn a_first_hello_long_after_the_start_lists_again() {
    let fake = FakeRuntime::new();
    let a = spec("a");
    fake.insert_existing(a.instance_name.clone(), ExecutionState::running());
    let mut h = harness_with(fake).await;
    listed(&h, 1).await;
    // The server was not reachable for a while.
    tokio::time::sleep(Duration::from_secs(11)).await;

    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
    assert_eq!(lists(&h.fake.calls()), 2, "{:?}", h.fake.calls());
}
