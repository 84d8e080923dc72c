//! Fuzzes manifest parsing: the input, as UTF-8 text, goes through
//! [`parse_manifest_with_warnings`], the code behind `ank apply` and
//! `ank-server --startup-manifest`.
//!
//! Invariants checked for a manifest that parses: it passes
//! [`validate_state`] again; it survives every way the product passes a
//! desired state on unchanged: the JSON tree the server keeps and filters,
//! the YAML `ank get state` prints (read back as a manifest), and the wire
//! (`CompleteState` and back, as the server answers a client); the server
//! accepts it as its startup state or names why not (a template that does
//! not render); and the specs it sends an agent in a ServerHello come back
//! from the wire unchanged. The runtime configs are fed to the agent's
//! podman and podman-kube parsers (which may reject them, never panic).

#![no_main]

use ank_agent::runtime_connectors::podman::config::PodmanRuntimeConfig;
use ank_agent::runtime_connectors::podman_kube::config::PodmanKubeRuntimeConfig;
use ank_common::convert::{complete_state_from_json, complete_state_to_json};
use ank_common::manifest::{parse_manifest, parse_manifest_with_warnings, validate_state};
use ank_common::messages::{FromServer, from_server_from_proto, from_server_to_proto};
use ank_common::{API_VERSION, State};
use ank_server::desired_state::{self, DesiredState};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok((state, warnings)) = parse_manifest_with_warnings("fuzz.yaml", text) else { return };
    assert_eq!(state.api_version, API_VERSION, "a parsed manifest is always v1");
    // The deprecation warning of a v0.1 manifest, or one per ignored
    // unknown field; each names the file.
    assert!(warnings.iter().all(|w| w.starts_with("fuzz.yaml: ")), "{warnings:?}");
    validate_state(&state).expect("a parsed manifest validates");
    check_json(&state);
    check_yaml(&state);
    check_wire(&state);
    check_server(&state);
    for wl in state.workloads.values() {
        let _ = PodmanRuntimeConfig::parse(&wl.runtime_config);
        let _ = PodmanKubeRuntimeConfig::parse(&wl.runtime_config);
    }
});

/// The server keeps the state as a JSON tree (masks, events).
fn check_json(state: &State) {
    let tree = serde_json::to_value(state).expect("a state serializes to JSON");
    let back: State = serde_json::from_value(tree).expect("the JSON tree of a state deserializes");
    assert_eq!(&back, state, "JSON round trip");
}

/// `ank get state -o yaml` prints with serde-saphyr; what it prints must
/// read back as the same manifest.
fn check_yaml(state: &State) {
    let yaml = serde_saphyr::to_string(state).expect("a state serializes to YAML");
    let back = parse_manifest("printed.yaml", &yaml).unwrap_or_else(|e| panic!("{e}\n--- printed:\n{yaml}"));
    assert_eq!(&back, state, "YAML round trip\n--- printed:\n{yaml}");
}

/// A CompleteStateResponse carries the state on the wire.
fn check_wire(state: &State) {
    let tree = serde_json::json!({ "desiredState": state });
    let wire = complete_state_from_json(&tree).expect("a valid state converts to the wire");
    let back = complete_state_to_json(wire).expect("the wire form of a valid state converts back");
    let back: State = serde_json::from_value(back["desiredState"].clone()).expect("a state again");
    assert_eq!(&back, state, "wire round trip");
}

/// What the server does with a startup manifest: render it and send each
/// agent its specs.
fn check_server(state: &State) {
    let Ok(desired) = DesiredState::new(state.clone()) else { return };
    assert_eq!(&desired.state, state);
    validate_state(&desired.rendered).expect("a rendered state validates");
    let agents: std::collections::BTreeSet<&str> =
        desired.rendered.workloads.values().map(|w| w.agent.as_str()).collect();
    for agent in agents.into_iter().filter(|a| !a.is_empty()) {
        let specs = desired_state::specs_for_agent(&desired.rendered, agent);
        assert!(!specs.is_empty());
        let hello = FromServer::ServerHello(specs);
        let back = from_server_from_proto(from_server_to_proto(&hello)).expect("a ServerHello converts back");
        assert_eq!(back, Some(hello), "ServerHello round trip");
    }
}
