//! Tests of the LogsManager with the FakeRuntime and a channel standing in
//! for the server link.

use std::time::Duration;

use ank_common::messages::{LogEntry, LogsRequest, ToServer};
use ank_common::{AgentName, ExecutionState, WorkloadInstanceName, WorkloadName};
use tokio::sync::mpsc;

use super::*;
use crate::runtime_connectors::fake::FakeRuntime;

const AGENT: &str = "agent_A";

fn instance(name: &str, agent: &str) -> WorkloadInstanceName {
    WorkloadInstanceName::new(&WorkloadName::new(name).unwrap(), &AgentName::new(agent).unwrap(), "cfg")
}

struct Setup {
    fake: Arc<FakeRuntime>,
    logs: LogsManagerHandle,
    server: mpsc::UnboundedReceiver<ToServer>,
    _shutdown: tokio_util::sync::DropGuard,
}

fn setup() -> Setup {
    let fake = Arc::new(FakeRuntime::new());
    let mut registry = RuntimeRegistry::new();
    registry.register(fake.clone());
    let (tx, server) = mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let logs = LogsManager::start(AGENT.into(), Arc::new(registry), tx, shutdown.clone());
    Setup { fake, logs, server, _shutdown: shutdown.drop_guard() }
}

impl Setup {
    async fn next(&mut self) -> ToServer {
        tokio::time::timeout(Duration::from_secs(5), self.server.recv()).await.expect("a message").expect("open")
    }

    /// Collects log lines until the stop response of `instance`.
    async fn lines_until_stop(&mut self, instance: &WorkloadInstanceName) -> Vec<String> {
        let (lines, reason) = self.until_stop(instance).await;
        assert_eq!(reason, "", "a log that ended normally");
        lines
    }

    /// Log lines and the stop response's reason of `instance`.
    async fn until_stop(&mut self, instance: &WorkloadInstanceName) -> (Vec<String>, String) {
        let mut lines = Vec::new();
        loop {
            match self.next().await {
                ToServer::LogEntriesResponse { request_id, entries } => {
                    assert_eq!(request_id, "r1");
                    lines.extend(entries.into_iter().map(|e| e.message));
                }
                ToServer::LogsStopResponse { request_id, workload_name, reason } => {
                    assert_eq!((request_id.as_str(), &workload_name), ("r1", instance));
                    return (lines, reason);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

fn request(names: Vec<WorkloadInstanceName>) -> LogsRequest {
    LogsRequest { workload_names: names, follow: false, tail: -1, since: None, until: None }
}

#[tokio::test]
async fn logs_of_a_workload_are_sent_then_a_stop_response() {
    let mut s = setup();
    let web = instance("web", AGENT);
    s.fake.insert_existing(web.clone(), ExecutionState::running());
    for l in ["one", "two", "three"] {
        s.fake.push_log(&web, l).await;
    }
    s.logs.start("r1".into(), request(vec![web.clone()]));
    assert_eq!(s.lines_until_stop(&web).await, ["one", "two", "three"]);
}

#[tokio::test]
async fn logs_pass_tail_since_and_until_to_the_runtime() {
    let mut s = setup();
    let web = instance("web", AGENT);
    s.fake.insert_existing(web.clone(), ExecutionState::running());
    for l in ["1", "2", "3", "4"] {
        s.fake.push_log(&web, l).await;
    }
    let mut req = request(vec![web.clone()]);
    req.tail = 2;
    req.since = Some("2026-11-23T00:00:00Z".into());
    req.until = Some("5m".into());
    s.logs.start("r1".into(), req);
    assert_eq!(s.lines_until_stop(&web).await, ["3", "4"]);
    let (_, options) = s.fake.log_requests().pop().unwrap();
    assert_eq!(
        options,
        LogOptions {
            follow: false,
            tail: Some(2),
            since: Some("2026-11-23T00:00:00Z".into()),
            until: Some("5m".into())
        }
    );
}

#[tokio::test]
async fn logs_of_an_unknown_workload_stop_at_once_and_other_agents_are_ignored() {
    let mut s = setup();
    let ghost = instance("ghost", AGENT);
    let elsewhere = instance("web", "agent_B");
    s.logs.start("r1".into(), request(vec![elsewhere, ghost.clone()]));
    let (lines, reason) = s.until_stop(&ghost).await;
    assert!(lines.is_empty());
    assert_eq!(
        reason,
        format!(
            "agent '{AGENT}' has no container for it (a finished workload's container is removed after its retention)"
        ),
        "the stop says why there are no lines"
    );
    assert!(tokio::time::timeout(Duration::from_millis(100), s.server.recv()).await.is_err(), "nothing for agent_B");
}

#[tokio::test]
async fn logs_follow_streams_new_lines_until_cancelled() {
    let mut s = setup();
    let web = instance("web", AGENT);
    s.fake.insert_existing(web.clone(), ExecutionState::running());
    s.fake.push_log(&web, "old").await;
    let mut req = request(vec![web.clone()]);
    req.follow = true;
    s.logs.start("r1".into(), req);
    let first = s.next().await;
    assert_eq!(
        first,
        ToServer::LogEntriesResponse {
            request_id: "r1".into(),
            entries: vec![LogEntry { workload_name: web.clone(), message: "old".into() }]
        }
    );
    s.fake.push_log(&web, "new").await;
    assert!(matches!(s.next().await, ToServer::LogEntriesResponse { entries, .. } if entries[0].message == "new"));
    s.logs.cancel("r1".into());
    tokio::time::timeout(Duration::from_secs(5), async {
        while s.fake.open_log_streams() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the runtime's stream is closed on cancel");
    s.fake.push_log(&web, "after").await;
    assert!(tokio::time::timeout(Duration::from_millis(100), s.server.recv()).await.is_err(), "no stop response");
}

#[tokio::test]
async fn logs_cancel_all_ends_every_stream() {
    let mut s = setup();
    let (a, b) = (instance("a", AGENT), instance("b", AGENT));
    for i in [&a, &b] {
        s.fake.insert_existing(i.clone(), ExecutionState::running());
        s.fake.push_log(i, "x").await;
    }
    let mut req = request(vec![a.clone(), b.clone()]);
    req.follow = true;
    s.logs.start("r1".into(), req);
    s.next().await;
    s.next().await;
    assert_eq!(s.fake.open_log_streams(), 2);
    s.logs.cancel_all();
    tokio::time::timeout(Duration::from_secs(5), async {
        while s.fake.open_log_streams() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("all streams closed");
}

#[tokio::test]
async fn logs_longer_than_2_mib_are_sent_cut_and_large_batches_are_split() {
    let mut s = setup();
    let web = instance("web", AGENT);
    s.fake.insert_existing(web.clone(), ExecutionState::running());
    let long = "x".repeat(5 * 1024 * 1024);
    let medium = "m".repeat(1536 * 1024);
    for l in ["first", long.as_str(), medium.as_str(), medium.as_str(), "last"] {
        s.fake.push_log(&web, l).await;
    }
    s.logs.start("r1".into(), request(vec![web.clone()]));
    let mut responses = Vec::new();
    loop {
        match s.next().await {
            ToServer::LogEntriesResponse { entries, .. } => {
                responses.push(entries.into_iter().map(|e| e.message).collect::<Vec<_>>())
            }
            ToServer::LogsStopResponse { .. } => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    let lines: Vec<&String> = responses.iter().flatten().collect();
    assert_eq!(lines.len(), 6, "every line arrives, plus the note on the cut one");
    assert_eq!(lines[0], "first");
    let kept = lines[1].strip_suffix(" [truncated]").expect("the long line is cut");
    assert!(kept.len() > 2 * 1024 * 1024 - 512 && long.starts_with(kept), "{}", kept.len());
    assert_eq!(lines[2], "The previous message was truncated due to exceeding the maximum 2 MB size.");
    assert_eq!((lines[3], lines[4], lines[5].as_str()), (&medium, &medium, "last"));
    assert!(
        responses.iter().all(|r| r.iter().map(String::len).sum::<usize>() <= 2 * 1024 * 1024),
        "no response above 2 MiB"
    );
}
