//! `ank get jobs`, `ank get job ID`, `ank job rerun` and `ank job
//! interrupt`: the apply jobs the server keeps and the two requests that
//! act on them.

use std::collections::BTreeMap;

use ank_common::jobs::{ItemClass, Job};
use ank_common::messages::{RequestContent, ResponseContent};
use anyhow::{Context, bail};

use crate::cli::{GetJobArgs, JobCommand, OutputFormat};
use crate::cmd::{Ctx, UpdateOutcome, fetch_state, follow};
use crate::output;

/// The table of `ank get jobs`.
pub fn jobs_table(jobs: &[&Job]) -> String {
    let cells: Vec<[String; 5]> = jobs
        .iter()
        .map(|j| {
            [
                j.id.to_string(),
                j.phase.as_str().to_owned(),
                j.workloads.len().to_string(),
                j.reason.clone(),
                j.created_at.clone(),
            ]
        })
        .collect();
    crate::table::table(["ID", "PHASE", "WORKLOADS", "REASON", "CREATED"], &cells)
}

/// The text of `ank get job ID`: a summary line, then the workloads by class.
pub fn job_text(job: &Job) -> String {
    let mut out = format!("job {}: {}", job.id, job.phase.as_str());
    if !job.reason.is_empty() {
        out.push_str(&format!(" ({})", job.reason));
    }
    out.push('\n');
    let mut cells: Vec<[String; 5]> = Vec::new();
    for class in ItemClass::ALL {
        for (name, item) in job.workloads.iter().filter(|(_, i)| i.class == class) {
            let action = if item.delete { "delete" } else { "apply" };
            cells.push([
                name.clone(),
                action.to_owned(),
                class.as_str().to_owned(),
                item.state.clone(),
                item.reason.clone(),
            ]);
        }
    }
    out.push_str(&crate::table::table(["WORKLOAD", "ACTION", "CLASS", "STATE", "REASON"], &cells));
    out
}

/// `ank get jobs`.
pub async fn get_jobs(ctx: &mut Ctx<'_>, format: Option<OutputFormat>) -> anyhow::Result<()> {
    let view = fetch_state(ctx, vec!["jobs".to_owned()]).await?;
    let jobs = view.jobs();
    match format {
        Some(f) => ctx.print(&output::records(&serde_json::to_value(&jobs)?, f)?),
        None => ctx.print(&jobs_table(&jobs)),
    }
}

/// `ank get job ID`.
pub async fn get_job(ctx: &mut Ctx<'_>, args: GetJobArgs) -> anyhow::Result<()> {
    let view = fetch_state(ctx, vec![format!("jobs.{}", args.id)]).await?;
    let Some(job) = view.jobs().into_iter().find(|j| j.id == args.id) else {
        bail!("the server keeps no job {} (see `ank get jobs`)", args.id)
    };
    match args.output {
        Some(f) => ctx.print(&output::records(&serde_json::to_value(job)?, f)?),
        None => ctx.print(&job_text(job)),
    }
}

/// `ank job rerun` and `ank job interrupt`.
pub async fn run(ctx: &mut Ctx<'_>, command: JobCommand) -> anyhow::Result<()> {
    let (content, what) = match command {
        JobCommand::Rerun { failed_only } => (RequestContent::JobRerun { failed_only }, "rerun"),
        JobCommand::Interrupt { id } => (RequestContent::JobInterrupt { job_id: id }, "interrupt"),
    };
    let interrupt = matches!(content, RequestContent::JobInterrupt { .. });
    let mut conn = ctx.connect().await?;
    let result = async {
        let id = match conn.request(content).await.with_context(|| format!("the {what} request failed"))? {
            ResponseContent::UpdateStateSuccess { job_id, .. } if job_id != 0 => job_id,
            ResponseContent::Error(msg) => bail!("the server rejected the request: {msg}"),
            other => bail!("unexpected answer to a {what} request (a server without jobs?): {other:?}"),
        };
        if interrupt {
            ctx.print(&format!("job {id} interrupted\n"))?;
            return Ok(());
        }
        ctx.print(&format!("job {id} accepted\n"))?;
        let outcome = UpdateOutcome { job_id: id, rerun: true, ..UpdateOutcome::default() };
        follow(ctx, &mut conn, &outcome, BTreeMap::new()).await
    }
    .await;
    conn.goodbye().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::StateView;
    use serde_json::json;

    fn tree() -> serde_json::Value {
        json!({"jobs": {
            "10": {"id": 10, "phase": "Succeeded", "createdAt": "2026-11-23T10:00:01.000Z", "workloads": {}},
            "9": {"id": 9, "phase": "Failed", "reason": "api: Failed(ExecFailed); not started: ui",
                  "createdAt": "2026-11-23T10:00:00.000Z", "workloads": {
                "db": {"class": "succeeded", "state": "Running(Ok)"},
                "api": {"class": "failed", "state": "Failed(ExecFailed)", "reason": "Failed(ExecFailed)"},
                "ui": {"class": "waiting", "reason": "waits for api (Failed(ExecFailed), needs Running)"},
            }},
        }})
    }

    #[test]
    fn jobs_are_listed_by_numeric_id() {
        let view = StateView::from_tree(&tree()).unwrap();
        let jobs = view.jobs();
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [9, 10]);
        let table = jobs_table(&jobs);
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["ID", "PHASE", "WORKLOADS", "REASON", "CREATED"]);
        assert!(table.lines().nth(1).unwrap().starts_with("9 "), "{table}");
        assert!(jobs_table(&jobs).contains("api: Failed(ExecFailed); not started: ui"));
        assert!(StateView::from_tree(&json!({})).unwrap().jobs().is_empty());
    }

    #[test]
    fn a_job_lists_its_workloads_by_class() {
        let view = StateView::from_tree(&tree()).unwrap();
        let text = job_text(view.jobs()[0]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "job 9: Failed (api: Failed(ExecFailed); not started: ui)");
        assert!(lines[1].starts_with("WORKLOAD"));
        let order: Vec<&str> = lines[2..].iter().map(|l| l.split_whitespace().next().unwrap()).collect();
        assert_eq!(order, ["db", "api", "ui"], "succeeded, failed, waiting");
        assert!(lines[4].contains("waiting") && lines[4].contains("waits for api"));
    }
}
