//! `ank`'s waiting after an update ends on a server that pushes it no
//! workload states, as Ankaios' server never pushes them to a commander.

use std::time::Duration;

use ank_cli::connection::Connection;
use ank_cli::wait::{Progress, WaitTracker, wait_for};
use ank_common::messages::{RequestContent, ResponseContent};
use ank_tests::inprocess::InProcess;

struct Quiet;

impl Progress for Quiet {
    fn changed(&mut self, _: &WaitTracker) -> anyhow::Result<()> {
        Ok(())
    }
    fn tick(&mut self, _: &WaitTracker) -> anyhow::Result<()> {
        Ok(())
    }
}

fn workload(dependency: Option<&str>) -> serde_json::Value {
    let mut w = serde_json::json!({"agent": "agent_A", "runtime": "podman",
        "runtimeConfig": "image: localhost/busybox:latest\ncommandArgs: [sleep, \"1000\"]"});
    if let Some(d) = dependency {
        w["dependencies"] = serde_json::json!({d: "ADD_COND_RUNNING"});
    }
    w
}

async fn apply(conn: &mut Connection, name: &str, dependency: Option<&str>) -> (Vec<String>, Vec<String>) {
    let new_state =
        serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {name: workload(dependency)}}});
    let answer = conn
        .request(RequestContent::UpdateState {
            new_state: ank_tests::typed_state(new_state),
            update_mask: vec![format!("desiredState.workloads.{name}")],
        })
        .await
        .expect("update");
    let ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, .. } = answer else {
        panic!("update refused: {answer:?}")
    };
    (added_workloads, deleted_workloads)
}

#[tokio::test(start_paused = true)]
async fn itest_wait_ends_without_pushed_workload_states() {
    let s = InProcess::start().await;
    let connect = || Connection::connect_asking_pushes(&s.url, None, Duration::from_secs(3), false, false);
    let mut conn = connect().await.expect("connect");
    assert!(!conn.pushes_states(), "not asked, so no pushes: the wait reads the states itself");
    let asked = Connection::connect(&s.url, None, Duration::from_secs(3), false).await.expect("connect");
    assert!(asked.pushes_states(), "asked: this server says it pushes, and the wait only follows them");
    // `web` waits for `db`, which comes only once the wait has begun.
    let (added, deleted) = apply(&mut conn, "web", Some("db")).await;
    let mut tracker = WaitTracker::new(&added, &deleted).expect("instance names");
    let mut other = connect().await.expect("connect");
    let later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        apply(&mut other, "db", None).await;
    });
    let waited = tokio::time::timeout(Duration::from_secs(10), wait_for(&mut conn, &mut tracker, &mut Quiet)).await;
    assert!(matches!(waited, Ok(Ok(()))), "the wait did not end: {waited:?}");
    assert!(tracker.is_done());
    later.await.expect("db applied");
    s.stop();
}
