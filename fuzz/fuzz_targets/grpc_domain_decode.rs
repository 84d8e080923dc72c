//! Fuzzes the gRPC edge of the daemons: the input decodes as a `ToServer`
//! (what the server reads from agents and clients) or a `FromServer` (what
//! an agent or `ank` reads from the server) and converts into the domain
//! messages with the conversions the daemons use
//! ([`to_server_from_proto`], [`from_server_from_proto`]).
//!
//! Input layout: bit 0 of byte 0 picks the message (0: ToServer,
//! 1: FromServer); the rest is the protobuf message.
//!
//! Invariants checked: no panic; a message that converts comes back the
//! same after the way out and in again (domain -> wire -> domain), so
//! whatever a daemon accepts it can also send; what a daemon does next
//! with the parts it reads first does not panic either: field masks of a
//! CompleteStateRequest filter a state tree, the instance names of workload
//! states print, and the runtime configs of added workloads go through the
//! agent's podman and podman-kube parsers.

#![no_main]

use ank_agent::runtime_connectors::podman::config::PodmanRuntimeConfig;
use ank_agent::runtime_connectors::podman_kube::config::PodmanKubeRuntimeConfig;
use ank_common::field_mask;
use ank_common::messages::{
    FromServer, RequestContent, ToServer, from_server_from_proto, from_server_to_proto, to_server_from_proto,
    to_server_to_proto,
};
use ank_common::workload::WorkloadSpec;
use ank_proto::grpc_api as g;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    if pick & 1 == 0 {
        let Ok(wire) = g::ToServer::decode(rest) else { return };
        let Ok(Some(msg)) = to_server_from_proto(wire) else { return };
        let back = to_server_from_proto(to_server_to_proto(&msg));
        assert_eq!(back.as_ref(), Ok(&Some(msg.clone())), "ToServer round trip");
        server_reads(&msg);
    } else {
        let Ok(wire) = g::FromServer::decode(rest) else { return };
        let Ok(Some(msg)) = from_server_from_proto(wire) else { return };
        let back = from_server_from_proto(from_server_to_proto(&msg));
        assert_eq!(back.as_ref(), Ok(&Some(msg.clone())), "FromServer round trip");
        client_reads(&msg);
    }
});

/// The first things the server does with a message.
fn server_reads(msg: &ToServer) {
    match msg {
        ToServer::Request(r) => {
            if let RequestContent::CompleteState { field_mask, .. } = &r.content {
                let tree = serde_json::json!({
                    "desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "x", "tags": {"k": "v"}}}},
                    "workloadStates": {"x": {"a": {"1": {"state": "Running", "subState": "Ok"}}}},
                    "agents": {"x": {"tags": {}}}
                });
                let _ = field_mask::filter(&tree, field_mask);
            }
        }
        ToServer::UpdateWorkloadState(states) => {
            for s in states {
                let _ = s.instance_name.to_string();
            }
        }
        _ => {}
    }
}

/// The first things an agent or `ank` does with a message.
fn client_reads(msg: &FromServer) {
    let parse = |specs: &[WorkloadSpec]| {
        for spec in specs {
            let _ = spec.instance_name.to_string();
            let _ = PodmanRuntimeConfig::parse(&spec.workload.runtime_config);
            let _ = PodmanKubeRuntimeConfig::parse(&spec.workload.runtime_config);
        }
    };
    match msg {
        FromServer::ServerHello(added) => parse(added),
        FromServer::UpdateWorkload { added, deleted, .. } => {
            parse(added);
            for d in deleted {
                let _ = d.instance_name.to_string();
            }
        }
        FromServer::UpdateWorkloadState(states) => {
            for s in states {
                let _ = (s.instance_name.to_string(), s.execution_state.kind.to_string());
            }
        }
        _ => {}
    }
}
