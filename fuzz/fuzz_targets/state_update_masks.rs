//! Fuzzes the server's UpdateStateRequest path: the input decodes as an
//! `UpdateStateRequest` (new state and update masks), converts as the
//! server's gRPC edge converts it, and is applied with the server's own
//! [`apply_update`] to one of a few complete desired states.
//!
//! Input layout: byte 0 picks the current state (modulo the number of base
//! states); the rest is the protobuf `UpdateStateRequest`.
//!
//! Invariants checked: no panic; the same update on the same state gives
//! the same answer (no hidden state); an accepted update gives a state that
//! passes the product's own validation, is `v1`, renders as the server
//! rendered it, leaves what no mask names untouched (masks only outside
//! `desiredState` leave the state as it was), and applied a second time
//! to its own result gives that result again (idempotence); the diff the
//! server sends agents turns the old scheduled workloads into the new ones,
//! and its UpdateWorkload message comes back from the wire unchanged.

#![no_main]

use std::collections::BTreeSet;
use std::sync::OnceLock;

use ank_common::convert::PartialCompleteState;
use ank_common::manifest::{parse_manifest, validate_state};
use ank_common::messages::{FromServer, RequestContent, from_server_from_proto, from_server_to_proto, request_from_pb};
use ank_common::{API_VERSION, State};
use ank_proto::ank_base as pb;
use ank_server::desired_state::{self, DesiredState, apply_update};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Current states the updates are applied to: empty, plain workloads on
/// two agents with every field set, and templates rendered from configs.
const BASES: [&str; 3] = [
    "apiVersion: v1\n",
    "apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    tags: {tier: data}
    runtimeConfig: 'image: db'
  web:
    runtime: podman
    agent: agent_B
    restartPolicy: ON_FAILURE
    dependencies: {db: ADD_COND_RUNNING}
    controlInterfaceAccess:
      allowRules:
        - {type: StateRule, operation: ReadWrite, filterMasks: [desiredState.workloads.web]}
        - {type: LogRule, workloadNames: [db]}
    files:
      - {mountPoint: /etc/web.conf, data: 'port=80'}
    runtimeConfig: 'image: web'
  idle:
    runtime: podman-kube
    agent: ''
    runtimeConfig: 'manifest: x'
",
    "apiVersion: v1
workloads:
  app:
    runtime: podman
    agent: '{{where.agent}}'
    configs: {where: placement, p: ports}
    files:
      - {mountPoint: /p, data: '{{p.web}}'}
    runtimeConfig: \"image: x\\ncommandOptions: [-p, '{{p.web}}:80']\"
  job:
    runtime: podman
    agent: agent_B
    dependencies: {app: ADD_COND_SUCCEEDED}
    configs: {p: ports}
    runtimeConfig: 'image: y'
configs:
  placement: {agent: agent_A}
  ports: {web: '8080', list: ['1', '2']}
",
];

fn bases() -> &'static [DesiredState] {
    static BASES_PARSED: OnceLock<Vec<DesiredState>> = OnceLock::new();
    BASES_PARSED.get_or_init(|| {
        BASES
            .iter()
            .map(|y| DesiredState::new(parse_manifest("base", y).expect("base parses")).expect("base renders"))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let current = &bases()[usize::from(pick) % BASES.len()];
    let Ok(update) = pb::UpdateStateRequest::decode(rest) else { return };
    let wire = pb::Request {
        request_id: "fuzz".into(),
        request_content: Some(pb::request::RequestContent::UpdateStateRequest(update)),
    };
    // As the server's gRPC edge: a message that does not convert is dropped.
    let Ok(request) = request_from_pb(wire) else { return };
    let RequestContent::UpdateState { new_state, update_mask } = request.content else {
        panic!("an UpdateStateRequest converts to an UpdateState")
    };
    let result = apply_update(current, &new_state, &update_mask);
    assert_eq!(result, apply_update(current, &new_state, &update_mask), "deterministic");
    let Ok(next) = result else { return };
    check_accepted(current, &next, &new_state, &update_mask);
});

fn check_accepted(current: &DesiredState, next: &DesiredState, new_state: &PartialCompleteState, masks: &[String]) {
    assert_eq!(next.state.api_version, API_VERSION);
    validate_state(&next.state).expect("an accepted state validates");
    assert_eq!(DesiredState::new(next.state.clone()).as_ref(), Ok(next), "rendered as the server rendered it");
    if !masks.is_empty() {
        check_untouched(&current.state, &next.state, masks);
    }
    let again = apply_update(next, new_state, masks).expect("the same update applies to its own result");
    assert_eq!(&again, next, "applying an update twice gives the result of applying it once");
    check_diff(&current.rendered, &next.rendered);
}

/// Top-level desired-state parts (a workload, a config item) that no mask
/// reaches stay as they were.
fn check_untouched(old: &State, new: &State, masks: &[String]) {
    let reached = |kind: &str, name: &str| {
        masks.iter().any(|m| {
            let segs: Vec<&str> = m.split('.').filter(|s| !s.is_empty()).collect();
            match segs.as_slice() {
                ["desiredState"] => true,
                ["desiredState", k, rest @ ..] if *k == kind => rest.first().is_none_or(|n| *n == name),
                _ => false,
            }
        })
    };
    for (name, wl) in &old.workloads {
        if !reached("workloads", name.as_str()) {
            assert_eq!(new.workloads.get(name), Some(wl), "workload '{name}' changed without a mask");
        }
    }
    for name in new.workloads.keys() {
        assert!(
            reached("workloads", name.as_str()) || old.workloads.contains_key(name),
            "'{name}' added without a mask"
        );
    }
    for (key, item) in &old.configs {
        if !reached("configs", key) {
            assert_eq!(new.configs.get(key), Some(item), "config '{key}' changed without a mask");
        }
    }
}

/// What the server sends agents: deleting `deleted` and adding `added` to
/// the old scheduled instances gives the new ones.
fn check_diff(old: &State, new: &State) {
    let d = desired_state::diff(old, new);
    // UpdateStateSuccess names unscheduled instances too (`name.id.`), as Ankaios does.
    let instances = |s: &State| -> BTreeSet<String> {
        s.workloads
            .iter()
            .map(|(n, w)| match desired_state::spec_of(n, w) {
                Some(spec) => spec.instance_name.to_string(),
                None => {
                    ank_common::WorkloadInstanceName::new(n, &ank_common::AgentName::unscheduled(), &w.runtime_config)
                        .to_string()
                }
            })
            .collect()
    };
    let mut expected = instances(old);
    for name in d.deleted_instance_names() {
        assert!(expected.remove(&name), "deleted '{name}' was not there");
    }
    for name in d.added_instance_names() {
        assert!(expected.insert(name.clone()), "added '{name}' was there already");
    }
    assert_eq!(expected, instances(new));
    for (agent, added) in &d.added {
        let deleted = d.deleted.get(agent).cloned().unwrap_or_default();
        let msg = FromServer::UpdateWorkload { added: added.clone(), deleted, resync: false };
        let back = from_server_from_proto(from_server_to_proto(&msg)).expect("an UpdateWorkload converts back");
        assert_eq!(back, Some(msg), "UpdateWorkload round trip to agent '{agent}'");
    }
}
