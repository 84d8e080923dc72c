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

use ank_common::messages::{HookChange, RequestContent, ResponseContent};
use anyhow::{Context, bail};

use crate::cli::{Cli, SettingsError};
use crate::connection::Connection;
use crate::view::StateView;
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
    /// The revocation lists for the server's certificate (`--crl_pem`).
    pub tls_crl: Option<std::path::PathBuf>,
    pub response_timeout: Duration,
    pub wait: bool,
    /// `--wait`: wait for the job to end and fail if it failed.
    pub wait_job: bool,
    pub quiet: bool,
    pub verbose: bool,
    /// `ANK_TRACE_MESSAGES`: every message to and from the server on
    /// stderr (what `-v` printed before; it buried the lines `-v` is for).
    pub trace_messages: bool,
}

/// Whether `ANK_TRACE_MESSAGES` asks for the message trace (set and not
/// empty, `0`, `false`, `no` or `off`).
pub fn trace_messages_requested(value: Option<&str>) -> bool {
    value.is_some_and(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false" | "no" | "off"))
}

impl Settings {
    /// Resolves the global options of `cli`.
    pub fn from_cli(cli: &Cli) -> Self {
        Self {
            server_url: cli.resolved_server_url(),
            tls: cli.tls_sources(),
            tls_check_url_host: cli.check_server_url_host,
            tls_crl: cli.tls.crl_pem.clone(),
            response_timeout: cli.response_timeout(),
            wait: cli.wait(),
            wait_job: cli.wait_job,
            quiet: cli.quiet,
            verbose: cli.verbose,
            trace_messages: trace_messages_requested(std::env::var("ANK_TRACE_MESSAGES").ok().as_deref()),
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
        let mut pem = sources
            .as_ref()
            .map(|s| s.client_pem(check_url_host).map_err(|e| SettingsError::Tls(e.to_string())))
            .transpose()?;
        if let (Some(pem), Some(crl)) = (pem.as_mut(), &self.settings.tls_crl) {
            let text =
                std::fs::read(crl).map_err(|e| SettingsError::Tls(format!("crl_pem '{}': {e}", crl.display())))?;
            pem.crl = Some(text);
        }
        Ok(Connection::connect(&url, pem.as_ref(), self.settings.response_timeout, self.settings.trace_messages)
            .await?)
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
    /// The mutating hooks that changed workloads (our server only).
    pub hook_changes: Vec<HookChange>,
    /// A job rerun: it changes no workload of the desired state, so
    /// "No workloads updated" would be false; its job says what it sends.
    pub rerun: bool,
}

/// Sends an `UpdateStateRequest`; a rejection is an error carrying the
/// server's message.
pub async fn send_update(conn: &mut Connection, content: RequestContent) -> anyhow::Result<UpdateOutcome> {
    match conn.request(content).await.context("the update request failed")? {
        ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, job_id, hook_changes } => {
            Ok(UpdateOutcome { added: added_workloads, deleted: deleted_workloads, job_id, hook_changes, rerun: false })
        }
        ResponseContent::Error(msg) => Err(crate::error_text::UpdateRejected(msg).into()),
        other => bail!("unexpected answer to an update request: {other:?}"),
    }
}

/// What Ankaios' `ank` prints when an update changed no workload.
pub const NOTHING_CHANGED: &str = "Apply successful. No workloads updated.";
/// What it prints before it waits for the changed workloads.
pub const WAITING: &str = "Successfully applied the manifest(s).\nWaiting for workload(s) to reach desired states (press Ctrl+C to interrupt).\n";

/// In wait mode, says what changed and follows the instances of `outcome`
/// until they settled (or its job is over), printing their table as
/// Ankaios does (nothing when quiet). With `--wait`, follows the job to its
/// end and fails if it failed.
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
    let quiet = ctx.settings.quiet;
    if tracker.is_empty() {
        if !quiet && !outcome.rerun {
            ctx.print(&format!("{NOTHING_CHANGED}\n"))?;
        }
        if !whole_job {
            return Ok(());
        }
    } else if !quiet {
        ctx.print(&format!("{WAITING}\n"))?;
    }
    // With nothing to show (only `--wait` on an unchanged state) no table.
    let job = if quiet || tracker.is_empty() {
        wait_any(conn, &mut tracker, outcome.job_id, whole_job, &mut crate::progress::Silent).await?
    } else {
        let live = std::io::stdout().is_terminal();
        let mut printer = crate::progress::TablePrinter::new(&mut *ctx.out, live, crate::table::output_width());
        wait_any(conn, &mut tracker, outcome.job_id, whole_job, &mut printer).await?
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
    progress: &mut dyn crate::wait::Progress,
) -> anyhow::Result<Option<Job>> {
    if job_id == 0 {
        wait_for(conn, tracker, progress).await?;
        return Ok(None);
    }
    crate::job_wait::wait_for_job(conn, tracker, job_id, whole_job, progress).await
}

/// Connects, sends the update, follows it and says goodbye.
/// `order`: the workloads in the order the user named them (a manifest's
/// order), for the report of `-v`; others follow in the server's order.
pub async fn update_and_follow(
    ctx: &mut Ctx<'_>,
    content: RequestContent,
    runtimes: BTreeMap<String, String>,
    order: &[String],
) -> anyhow::Result<UpdateOutcome> {
    let interrupted = crate::signals::termination();
    let mut conn = ctx.connect().await?;
    let result = until_interrupted(interrupted, async {
        // As Ankaios' `ank`: the state is read before every update. Scripts
        // that start an event subscriber and an update together rely on the
        // time that takes.
        crate::wait::read_state(&mut conn, vec!["workloadStates".to_owned()], "the workload states").await?;
        let outcome = send_update(&mut conn, content).await?;
        report_update(ctx, &outcome, order);
        follow(ctx, &mut conn, &outcome, runtimes).await?;
        Ok(outcome)
    })
    .await;
    conn.goodbye().await;
    result
}

/// Runs `work` until it ends or `interrupted` (a
/// [`termination`](crate::signals::termination) future) does; the signal
/// becomes an [`Interrupted`](crate::signals::Interrupted) error, so the
/// caller still says goodbye to the server before the process exits.
pub async fn until_interrupted<T>(
    interrupted: impl Future<Output = crate::signals::Interrupted>,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    tokio::select! {
        result = work => result,
        signal = interrupted => Err(signal.into()),
    }
}

/// Our extension: the job an update became and the mutating hooks that
/// changed its workloads, on stderr, with `--verbose` or `--wait` (Ankaios'
/// `ank` has neither jobs nor this report, so by default nothing is added).
pub fn report_update(ctx: &Ctx<'_>, outcome: &UpdateOutcome, order: &[String]) {
    let wanted = ctx.settings.verbose || ctx.settings.wait_job;
    if wanted && !ctx.settings.quiet {
        for line in update_report(outcome, order) {
            eprintln!("{line}");
        }
    }
}

/// The lines [`report_update`] prints for `outcome`; each hook's
/// workloads in `order` (those it does not name after them, as they came).
pub fn update_report(outcome: &UpdateOutcome, order: &[String]) -> Vec<String> {
    let mut lines = Vec::new();
    if outcome.job_id != 0 {
        lines.push(format!("job {} accepted", outcome.job_id));
    }
    for change in &outcome.hook_changes {
        let mut names: Vec<&String> = change.workloads.iter().collect();
        names.sort_by_key(|n| order.iter().position(|o| o == *n).unwrap_or(usize::MAX));
        let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
        lines.push(format!("mutating hook '{}' changed: {}", change.hook, names.join(", ")));
    }
    lines
}

/// Sends one state request and says goodbye; the answer is read as a
/// view (typed: JSON only where a command prints it).
pub async fn fetch_state(ctx: &Ctx<'_>, masks: Vec<String>) -> anyhow::Result<StateView> {
    let mut conn = ctx.connect().await?;
    let request = RequestContent::CompleteState { field_mask: masks, subscribe_for_events: false };
    let response = conn.request(request).await;
    conn.goodbye().await;
    match response.context("the state request failed")? {
        ResponseContent::CompleteState(state) => Ok(StateView::of(*state)),
        ResponseContent::Error(msg) => bail!("the server rejected the request: {msg}"),
        other => bail!("unexpected answer to a state request: {other:?}"),
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;

    // `ank -v apply` names a hook's workloads in the manifest's order, as
    // docs/mutating-hooks.md shows (`web, db`), not sorted.
    #[test]
    fn the_hook_report_follows_the_manifest_order() {
        let outcome = UpdateOutcome {
            job_id: 7,
            hook_changes: vec![HookChange {
                hook: "add-owner-tag".into(),
                workloads: vec!["db".into(), "extra".into(), "web".into()],
            }],
            ..UpdateOutcome::default()
        };
        let order = ["web".to_owned(), "db".to_owned()];
        assert_eq!(
            update_report(&outcome, &order),
            ["job 7 accepted", "mutating hook 'add-owner-tag' changed: web, db, extra"]
        );
    }

    // The message dumps that used to come with `-v` need ANK_TRACE_MESSAGES.
    #[test]
    fn the_message_trace_is_asked_for_by_its_own_variable() {
        for on in ["1", "true", "yes"] {
            assert!(trace_messages_requested(Some(on)), "{on}");
        }
        for off in [None, Some(""), Some("0"), Some("false"), Some("off")] {
            assert!(!trace_messages_requested(off), "{off:?}");
        }
    }
}
