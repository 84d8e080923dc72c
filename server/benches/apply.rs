//! One apply against a desired state of 1000 workloads on 10 agents, as the
//! server does it once the request is decoded: merge + validate + render
//! (templates from config items) + size check + diff + fan-out (one
//! encoded UpdateWorkload message per affected agent).
//!
//! `cargo bench -p ank-server --bench apply`

use ank_common::State;
use ank_common::convert::PartialCompleteState;
use ank_common::messages::FromServer;
use ank_common::messages::from_server_to_proto;
use ank_server::desired_state::{self, DesiredState};
use criterion::{Criterion, criterion_group, criterion_main};
use prost::Message;
use serde_json::json;

const WORKLOADS: usize = 1000;
const AGENTS: usize = 10;

fn big_state() -> State {
    let mut yaml = String::from("apiVersion: v1\nworkloads:\n");
    for i in 0..WORKLOADS {
        yaml.push_str(&format!(
            "  wl{i}:\n    runtime: podman\n    agent: agent{}\n    restartPolicy: ON_FAILURE\n    tags:\n      owner: team{}\n    configs:\n      app: app{}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandOptions: [\"-e\", \"LEVEL={{{{app.level}}}}\"]\n      commandArgs: [sleep, \"{i}\"]\n",
            i % AGENTS,
            i % 7,
            i % 10
        ));
    }
    yaml.push_str("configs:\n");
    for c in 0..10 {
        yaml.push_str(&format!("  app{c}:\n    level: info\n"));
    }
    ank_common::manifest::parse_manifest("bench", &yaml).expect("valid bench manifest")
}

/// apply + diff + encode the message of every agent the diff touches.
fn apply(current: &DesiredState, new_state: &PartialCompleteState, masks: &[String]) -> usize {
    let next = desired_state::apply_update(current, new_state, masks).expect("valid update");
    let diff = desired_state::diff(&current.rendered, &next.rendered);
    let agents: std::collections::BTreeSet<&String> = diff.added.keys().chain(diff.deleted.keys()).collect();
    agents
        .into_iter()
        .map(|agent| {
            let msg = FromServer::UpdateWorkload {
                added: diff.added.get(agent).cloned().unwrap_or_default(),
                deleted: diff.deleted.get(agent).cloned().unwrap_or_default(),
                resync: false,
            };
            from_server_to_proto(&msg).encoded_len()
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let current = DesiredState::new(big_state()).expect("valid state");
    let typed = |tree: serde_json::Value| PartialCompleteState::from_json(&tree).expect("a valid state");
    let one = typed(json!({"desiredState": {"apiVersion": "v1", "workloads": {"wl5": {
        "runtime": "podman", "agent": "agent5", "runtimeConfig": "image: localhost/busybox:latest\ncommandArgs: [sleep, \"77\"]\n"
    }}}}));
    let one_mask = vec!["desiredState.workloads.wl5".to_owned()];
    c.bench_function("apply one workload into 1000 on 10 agents", |b| b.iter(|| apply(&current, &one, &one_mask)));
    let config = typed(json!({"desiredState": {"apiVersion": "v1", "configs": {"app3": {"level": "debug"}}}}));
    let config_mask = vec!["desiredState.configs.app3".to_owned()];
    c.bench_function("apply a config item used by 100 of 1000 workloads", |b| {
        b.iter(|| apply(&current, &config, &config_mask))
    });
    let mut everything = serde_json::to_value(&current.state).expect("state as JSON");
    everything["configs"]["app0"]["level"] = json!("warn");
    let all = typed(json!({ "desiredState": everything }));
    c.bench_function("replace the whole state of 1000 workloads", |b| b.iter(|| apply(&current, &all, &[])));
}

criterion_group!(benches, bench);
criterion_main!(benches);
