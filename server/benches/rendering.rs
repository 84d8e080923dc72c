//! Rendering a desired state of 1000 workloads on 10
//! agents, in 100 pipeline groups of 10 members with priorities and two
//! `${seq:8000}` macros each: validation, templates, group rendering and
//! effective priorities (`DesiredState::new`), then the `${seq:N}` pools
//! (`SeqPools::plan`, a re-plan that keeps every number).
//!
//! `cargo bench -p ank-server --bench rendering`

use ank_common::State;
use ank_server::desired_state::DesiredState;
use ank_server::seq_pools::SeqPools;
use criterion::{Criterion, criterion_group, criterion_main};

const WORKLOADS: usize = 1000;
const AGENTS: usize = 10;
const GROUP_SIZE: usize = 10;

fn big_state() -> State {
    let mut yaml = String::from("apiVersion: v1\nworkloads:\n");
    for i in 0..WORKLOADS {
        yaml.push_str(&format!(
            "  wl{i}:\n    runtime: podman\n    agent: agent{}\n    priority: {}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandOptions: [\"-e\", \"PORT_A=${{seq:8000}}\", \"-e\", \"PORT_B=${{seq:8000}}\"]\n",
            (i / GROUP_SIZE) % AGENTS,
            i % 13
        ));
    }
    yaml.push_str("groups:\n");
    for g in 0..WORKLOADS / GROUP_SIZE {
        let members: Vec<String> = (0..GROUP_SIZE).map(|m| format!("wl{}", g * GROUP_SIZE + m)).collect();
        yaml.push_str(&format!("  g{g}:\n    mode: pipeline\n    members: [{}]\n", members.join(", ")));
    }
    ank_common::manifest::parse_manifest("bench", &yaml).expect("valid bench manifest")
}

fn bench(c: &mut Criterion) {
    let state = big_state();
    c.bench_function("render 1000 workloads in 100 pipelines (groups + effective priorities)", |b| {
        b.iter(|| DesiredState::new(state.clone()).expect("valid"))
    });
    let desired = DesiredState::new(state).expect("valid");
    let mut pools = SeqPools::in_memory();
    let mut first = desired.rendered.clone();
    let table = pools.plan(&mut first).expect("numbers");
    pools.commit(table);
    c.bench_function("${seq:N} re-plan of 2000 macros on 10 agents", |b| {
        b.iter(|| {
            let mut rendered = desired.rendered.clone();
            pools.plan(&mut rendered).expect("numbers")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
