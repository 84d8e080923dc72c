//! The tool's measurement end to end against an in-process server: five
//! in-process agents of 20 workloads, two event subscribers; checks the
//! correctness results (every workload created once, the changed workload
//! delivered to its agent only, no restart at the reconnection), not the
//! timings.

use ank_server_scale::measure::{Plan, measure};
use ank_server_scale::server::Target;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_scale_measures_five_agents_correctly() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let stop = CancellationToken::new();
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(initial, listener, stop.clone()));
    let target = Target { url, pid: std::process::id() };
    let plan = Plan { server: "ours".into(), agents: 5, round: 1, subscribers: 2 };

    let sample = tokio::time::timeout(std::time::Duration::from_secs(25), measure(&target, &plan))
        .await
        .expect("within 25 s")
        .expect("measured");
    stop.cancel();

    let c = sample.correctness;
    assert_eq!(c.creates_after_apply, 100, "{c:?}");
    assert_eq!(c.agents_complete, 5, "{c:?}");
    assert!(c.update_delivered, "{c:?}");
    assert_eq!(c.update_side_effects, 0, "{c:?}");
    assert_eq!(c.reconnect_restarts, 0, "{c:?}");
    assert!(c.holds(5));
    assert_eq!(sample.events_per_subscriber.len(), 2);
    assert!(sample.events_per_subscriber.iter().all(|&e| e > 0), "{:?}", sample.events_per_subscriber);
    assert!(sample.apply_created_s <= sample.apply_running_s);
    assert!(sample.reconnect_s.is_some(), "our server shows a stopped agent gone");
    assert!(sample.rss_after_apply_kib > 0 && sample.peak_rss_kib >= sample.rss_after_apply_kib);
}
