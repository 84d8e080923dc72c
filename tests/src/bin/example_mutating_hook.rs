//! A mutating hook for the tests, behaving as Ankaios' example hook does:
//! it reads a protobuf `UpdateWorkload` from stdin, vetoes (exit 1, reason
//! on stderr) when an added workload has the tag
//! `example_mutating_hook: reject`, changes the tag value `update` to
//! `marked`, and otherwise echoes its input unchanged.

use std::io::{Read, Write};
use std::process::ExitCode;

use ank_proto::grpc_api::UpdateWorkload;
use prost::Message;

const TAG: &str = "example_mutating_hook";

fn main() -> ExitCode {
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("cannot read stdin: {e}");
        return ExitCode::from(2);
    }
    let mut update = match UpdateWorkload::decode(input.as_slice()) {
        Ok(update) => update,
        Err(e) => {
            eprintln!("cannot decode UpdateWorkload: {e}");
            return ExitCode::from(2);
        }
    };
    let tag = |a: &ank_proto::grpc_api::AddedWorkload| {
        a.workload.as_ref().and_then(|w| w.tags.as_ref()).and_then(|t| t.tags.get(TAG)).cloned()
    };
    if let Some(rejected) = update.added_workloads.iter().find(|a| tag(a).as_deref() == Some("reject")) {
        let name = rejected.instance_name.as_ref().map_or("<unknown>", |n| n.workload_name.as_str());
        eprintln!("Reject input workloads due to the presence of \"{TAG}: reject\" tag on workload '{name}'");
        return ExitCode::FAILURE;
    }
    let mut mutated = false;
    for added in &mut update.added_workloads {
        let Some(tags) = added.workload.as_mut().and_then(|w| w.tags.as_mut()) else { continue };
        if let Some(value) = tags.tags.get_mut(TAG).filter(|v| v.as_str() == "update") {
            *value = "marked".to_owned();
            mutated = true;
        }
    }
    let output = if mutated { update.encode_to_vec() } else { input };
    if let Err(e) = std::io::stdout().write_all(&output) {
        eprintln!("cannot write stdout: {e}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}
