//! `latency`: one workload sends CompleteStateRequests one after the other
//! and times each round trip (written to `output` until the response is
//! read from `input`: agent, server and back).

use std::path::Path;

use ank_proto::ank_base::{self as pb, response::ResponseContent};
use ank_proto::control_api::from_ankaios::FromAnkaiosEnum;
use anyhow::bail;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::pipes::{self, Workload};
use crate::stats::{Summary, ms};

/// Runs `requests` round trips asking for `mask` and prints the summary.
pub async fn run(folder: &Path, requests: usize, mask: &str) -> anyhow::Result<()> {
    let (tx, mut inbox) = mpsc::unbounded_channel();
    let mut workload = Workload::open(folder, 0, tx)?;
    pipes::connect(std::slice::from_mut(&mut workload), &mut inbox).await?;
    let run = pipes::run_id();
    let mut samples = Vec::with_capacity(requests);
    for i in 0..requests {
        let id = format!("{run}-{i}");
        let content = pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
            field_mask: vec![mask.to_owned()],
            subscribe_for_events: false,
        });
        let sent = Instant::now();
        workload.request(&id, content).await?;
        samples.push(wait_for(&mut inbox, &id).await? - sent);
    }
    let Some(s) = Summary::of(samples) else { bail!("no requests made") };
    println!(
        "latency: {} CompleteStateRequests ('{mask}') via {}: median {} ms, p90 {} ms, p99 {} ms, max {} ms",
        s.count,
        workload.name,
        ms(s.median),
        ms(s.p90),
        ms(s.p99),
        ms(s.max)
    );
    Ok(())
}

/// When the response to `id` arrived; an error response is an error.
async fn wait_for(inbox: &mut pipes::Inbox, id: &str) -> anyhow::Result<Instant> {
    loop {
        let r = pipes::next(inbox, &format!("the response to '{id}'")).await?;
        let FromAnkaiosEnum::Response(response) = r.message else { continue };
        if response.request_id != id {
            continue;
        }
        return match response.response_content {
            Some(ResponseContent::CompleteStateResponse(_)) => Ok(r.at),
            Some(ResponseContent::Error(e)) => bail!("request '{id}' failed: {}", e.message),
            other => bail!("unexpected response to '{id}': {other:?}"),
        };
    }
}
