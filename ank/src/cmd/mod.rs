//! The verbs of `ank`, one file each, and what they share: the settings
//! taken from the global options, the output sink, connecting, and sending
//! an update followed by the wait mode.

pub mod apply;
pub mod completion;
pub mod delete_configs;
pub mod delete_workloads;
pub mod describe;
pub mod get_agents;
pub mod get_configs;
pub mod get_events;
pub mod get_groups;
pub mod get_state;
pub mod get_workloads;
pub mod jobs;
pub mod logs;
pub mod rendered_workloads;
pub mod run_workload;
pub mod set_state;
pub mod wait_condition;
pub mod watch_workloads;
pub mod workload_events;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use ank_common::messages::{RequestContent, ResponseContent};
use anyhow::{Context, bail};

use crate::cli::{Cli, SettingsError};
use crate::connection::Connection;
use crate::output;
use crate::wait::{WaitTracker, wait_for};
use ank_common::jobs::{Job, JobPhase};

/// The global options, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The server URL, or why there is none (TLS requested).
    pub server_url: Result<String, SettingsError>,
    pub tls: Result<Option<ank_common::tls::TlsSources>, SettingsError>,
    /// The server's certificate must name the URL's host, not `ank-server`.
    pub tls_check_url_host: bool,
    pub response_timeout: Duration,
    pub wait: bool,
    /// `--wait`: wait for the job to end and fail if it failed.
    pub wait_job: bool,
    pub quiet: bool,
    pub verbose: bool,
}

impl Settings {
    /// Resolves the global options of `cli`.
    pub fn from_cli(cli: &Cli) -> Self {
        Self {
            server_url: cli.resolved_server_url(),
            tls: cli.tls_sources(),
            tls_check_url_host: cli.check_server_url_host,
            response_timeout: cli.response_timeout(),
            wait: cli.wait(),
            wait_job: cli.wait_job,
            quiet: cli.quiet,
            verbose: cli.verbose,
        }
    }
}

/// What a command needs: settings and where its output goes.
pub struct Ctx<'a> {
    pub settings: Settings,
    pub out: &'a mut dyn Write,
}

impl Ctx<'_> {
    /// Opens the command connection to the server.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        let url = self.settings.server_url.clone()?;
        let sources = self.settings.tls.clone()?;
        let check_url_host = self.settings.tls_check_url_host;
        let pem = sources.as_ref().map(|s| s.client_pem(check_url_host).map_err(SettingsError::Tls)).transpose()?;
        Ok(Connection::connect(&url, pem.as_ref(), self.settings.response_timeout, self.settings.verbose).await?)
    }

    /// Writes `text` to the output.
    pub fn print(&mut self, text: &str) -> anyhow::Result<()> {
        self.out.write_all(text.as_bytes()).and_then(|()| self.out.flush()).context("cannot write the output")
    }

    /// Writes a warning to stderr unless quiet.
    pub fn warn(&self, text: &str) {
        if !self.settings.quiet {
            eprintln!("warning: {text}");
        }
    }
}

/// The instance names an accepted update added and deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateOutcome {
    pub added: Vec<String>,
    pub deleted: Vec<String>,
    /// The job the change became (0: a server without jobs).
    pub job_id: u64,
}

/// Sends an `UpdateStateRequest`; a rejection is an error carrying the
/// server's message.
pub async fn send_update(conn: &mut Connection, content: RequestContent) -> anyhow::Result<UpdateOutcome> {
    if let RequestContent::UpdateState { new_state, .. } = &content {
        // The wire conversion would silently drop a tree it cannot encode.
        ank_common::convert::complete_state_from_json(new_state).context("cannot encode the new state")?;
    }
    match conn.request(content).await.context("the update request failed")? {
        ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, job_id } => {
            Ok(UpdateOutcome { added: added_workloads, deleted: deleted_workloads, job_id })
        }
        ResponseContent::Error(msg) => bail!("the server rejected the request: {msg}"),
        other => bail!("unexpected answer to an update request: {other:?}"),
    }
}

/// In wait mode, follows the instances of `outcome` until they settled
/// (or its job is over) and prints their table (unless quiet). With
/// `--wait`, follows the job to its end and fails if it failed.
pub async fn follow(
    ctx: &mut Ctx<'_>,
    conn: &mut Connection,
    outcome: &UpdateOutcome,
    runtimes: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    if !ctx.settings.wait {
        return Ok(());
    }
    let mut tracker = WaitTracker::new(&outcome.added, &outcome.deleted)
        .context("the server answered with an invalid instance name")?
        .with_runtimes(runtimes);
    let whole_job = ctx.settings.wait_job;
    if whole_job && outcome.job_id == 0 {
        bail!("--wait needs a server with apply jobs; this one answered without a job id");
    }
    if tracker.is_empty() && !whole_job {
        return Ok(());
    }
    let job = if ctx.settings.quiet {
        wait_any(conn, &mut tracker, outcome.job_id, whole_job, &mut |_| Ok(())).await?
    } else if !std::io::stdout().is_terminal() {
        // Scripts and pipes get the final table only.
        let job = wait_any(conn, &mut tracker, outcome.job_id, whole_job, &mut |_| Ok(())).await?;
        if !tracker.is_empty() {
            ctx.print(&output::workload_table(&tracker.rows()))?;
        }
        job
    } else {
        // On a terminal the table stays live: redrawn in place on every change.
        let mut shown = String::new();
        wait_any(conn, &mut tracker, outcome.job_id, whole_job, &mut |t| {
            let next = output::workload_table(&t.rows());
            if next != shown {
                ctx.print(&output::redraw(&shown, &next))?;
                shown = next;
            }
            Ok(())
        })
        .await?
    };
    if !whole_job {
        return Ok(());
    }
    match job {
        Some(job) if job.phase.is_final() && job.phase != JobPhase::Succeeded => {
            bail!("job {} {}: {}", job.id, job.phase.as_str(), job.reason)
        }
        Some(_) => Ok(()),
        None => bail!("the server no longer keeps job {}", outcome.job_id),
    }
}

/// Waits with the job when the server has jobs, else on the instances.
async fn wait_any(
    conn: &mut Connection,
    tracker: &mut WaitTracker,
    job_id: u64,
    whole_job: bool,
    on_change: &mut dyn FnMut(&WaitTracker) -> anyhow::Result<()>,
) -> anyhow::Result<Option<Job>> {
    if job_id == 0 {
        wait_for(conn, tracker, on_change).await?;
        return Ok(None);
    }
    crate::job_wait::wait_for_job(conn, tracker, job_id, whole_job, on_change).await
}

/// Connects, sends the update, follows it and says goodbye.
pub async fn update_and_follow(
    ctx: &mut Ctx<'_>,
    content: RequestContent,
    runtimes: BTreeMap<String, String>,
) -> anyhow::Result<UpdateOutcome> {
    let mut conn = ctx.connect().await?;
    let result = async {
        let outcome = send_update(&mut conn, content).await?;
        if outcome.job_id != 0 && !ctx.settings.quiet {
            eprintln!("job {} accepted", outcome.job_id);
        }
        follow(ctx, &mut conn, &outcome, runtimes).await?;
        Ok(outcome)
    }
    .await;
    conn.goodbye().await;
    result
}

/// Sends one state request and says goodbye.
pub async fn fetch_state(ctx: &Ctx<'_>, masks: Vec<String>) -> anyhow::Result<serde_json::Value> {
    let mut conn = ctx.connect().await?;
    let request = RequestContent::CompleteState { field_mask: masks, subscribe_for_events: false };
    let response = conn.request(request).await;
    conn.goodbye().await;
    match response.context("the state request failed")? {
        ResponseContent::CompleteState(tree) => Ok(*tree),
        ResponseContent::Error(msg) => bail!("the server rejected the request: {msg}"),
        other => bail!("unexpected answer to a state request: {other:?}"),
    }
}
