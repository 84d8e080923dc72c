//! What mutating hooks add to one apply: a chain of 1, 3 and 10 no-op
//! hooks (`exec cat`, the cheapest real executable) on the change of one
//! workload and of 100 workloads. Process start dominates; without hooks
//! configured the server takes none of this path.
//!
//! `cargo bench -p ank-server --bench hooks`

use std::path::Path;
use std::time::Duration;

use ank_common::State;
use ank_server::hooks::{HookConfig, HooksRegistry, effect};
use criterion::{Criterion, criterion_group, criterion_main};

fn state(workloads: usize) -> State {
    let mut yaml = String::from("apiVersion: v1\nworkloads:\n");
    for i in 0..workloads {
        yaml.push_str(&format!(
            "  wl{i}:\n    runtime: podman\n    agent: agent{}\n    tags:\n      owner: team{}\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [sleep, \"{i}\"]\n",
            i % 10,
            i % 7
        ));
    }
    ank_common::manifest::parse_manifest("bench", &yaml).expect("valid bench manifest")
}

fn noop_hooks(dir: &Path, count: usize) -> HooksRegistry {
    use std::os::unix::fs::PermissionsExt;
    let hooks = (0..count)
        .map(|i| {
            let name = format!("noop{i}");
            let path = dir.join(&name);
            std::fs::write(&path, "#!/bin/sh\nexec cat\n").expect("write hook");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod hook");
            HookConfig { name, prio: 0, path: dir.to_path_buf(), timeout: Duration::from_secs(5) }
        })
        .collect();
    HooksRegistry::new(hooks)
}

fn bench_hooks(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = State { api_version: "v1".into(), ..Default::default() };
    let mut group = c.benchmark_group("hooks");
    group.sample_size(20);
    for workloads in [1, 100] {
        let input = effect::input(&empty, &state(workloads)).expect("a change");
        for count in [1, 3, 10] {
            let sub = dir.path().join(format!("{workloads}-{count}"));
            std::fs::create_dir(&sub).expect("mkdir");
            let hooks = noop_hooks(&sub, count);
            group.bench_function(format!("{count}_noop_hooks_{workloads}_workloads"), |b| {
                b.iter(|| rt.block_on(hooks.run(input.message.clone())).expect("no-op chain"))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_hooks);
criterion_main!(benches);
