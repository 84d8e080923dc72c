//! `ank logs [-f] [-t N] [-n] [-s T] [-u T] NAME...`: prints the logs of
//! workloads. The names are resolved to instance names from the workload
//! states; the server forwards the request to the agents and streams the
//! lines back until every workload's log ended, or, with `--follow`, until
//! interrupted (then the request is cancelled).

use std::collections::BTreeSet;

use ank_common::WorkloadInstanceName;
use ank_common::messages::{LogsRequest, RequestContent, ResponseContent};
use anyhow::{Context, bail};

use crate::cli::LogsArgs;
use crate::cmd::{Ctx, fetch_state};
use crate::connection::Connection;
use crate::view::StateView;

/// The instance names of `names` in the workload states; unknown names are
/// an error naming them.
pub fn resolve(view: &StateView, names: &[String]) -> anyhow::Result<Vec<WorkloadInstanceName>> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let instances = view.instances();
    for name in names {
        let before = found.len();
        found.extend(instances.iter().filter(|i| &i.workload_name == name).cloned());
        if found.len() == before {
            missing.push(name.as_str());
        }
    }
    // Ankaios' words, for the first unknown name.
    if let Some(m) = missing.first() {
        bail!("Failed to output logs: 'Command failed: 'Workload name '{m}' does not exist.''");
    }
    Ok(found)
}

/// One output line: Ankaios' `NAME MESSAGE` when the names are asked for or
/// more than one instance is streamed.
pub fn format_line(name: &WorkloadInstanceName, message: &str, with_name: bool) -> String {
    if with_name { format!("{} {message}\n", name.workload_name) } else { format!("{message}\n") }
}

/// Whether lines carry their workload's name: asked for (`-n`), or more
/// than one instance streams (as Ankaios).
pub fn names_shown(instances: usize, asked: bool) -> bool {
    asked || instances > 1
}

/// Prints the logs.
pub async fn run(ctx: &mut Ctx<'_>, args: LogsArgs) -> anyhow::Result<()> {
    let names = resolve(&fetch_state(ctx, vec!["workloadStates".to_owned()]).await?, &args.workloads)?;
    let with_name = names_shown(names.len(), args.names);
    let interrupted = crate::signals::termination();
    let mut conn = ctx.connect().await?;
    let request_id = conn.new_request_id();
    let request = LogsRequest {
        workload_names: names,
        follow: args.follow,
        tail: args.tail,
        since: args.since.clone(),
        until: args.until.clone(),
    };
    conn.send_request(&request_id, RequestContent::Logs(request)).await?;
    let result = tokio::select! {
        r = stream(ctx, &mut conn, &request_id, with_name) => r,
        _ = interrupted => {
            cancel(&mut conn, &request_id).await;
            Ok(())
        }
    };
    conn.goodbye().await;
    result
}

/// Prints entries until every accepted workload's log ended.
async fn stream(ctx: &mut Ctx<'_>, conn: &mut Connection, request_id: &str, with_name: bool) -> anyhow::Result<()> {
    let first = tokio::time::timeout(ctx.settings.response_timeout, conn.next_response(request_id))
        .await
        .context("no answer to the log request")??;
    let mut open: BTreeSet<WorkloadInstanceName> = match first {
        ResponseContent::LogsRequestAccepted(accepted) => accepted.into_iter().collect(),
        ResponseContent::Error(e) => bail!("the server rejected the log request: {e}"),
        other => bail!("unexpected answer to a log request: {other:?}"),
    };
    if open.is_empty() {
        bail!("the server knows none of the requested workloads");
    }
    let mut missing = Vec::new();
    while !open.is_empty() {
        match conn.next_response(request_id).await? {
            ResponseContent::LogEntries(entries) => {
                let text: String =
                    entries.iter().map(|e| format_line(&e.workload_name, &e.message, with_name)).collect();
                ctx.print(&text)?;
            }
            ResponseContent::LogsStop { workload_name, reason } => {
                open.remove(&workload_name);
                if !reason.is_empty() {
                    missing.push(format!("'{}': {reason}", workload_name.workload_name));
                }
            }
            ResponseContent::Error(e) => bail!("the log stream failed: {e}"),
            other => bail!("unexpected message in a log stream: {other:?}"),
        }
    }
    // Our server says why a log could not be read (Ankaios' never does).
    if !missing.is_empty() {
        bail!("no logs of {}", missing.join("; "));
    }
    Ok(())
}

/// Cancels the stream (Ctrl-C) and waits briefly for the confirmation.
async fn cancel(conn: &mut Connection, request_id: &str) {
    if conn.send_request(request_id, RequestContent::LogsCancel).await.is_ok() {
        let wait = async {
            while let Ok(r) = conn.next_response(request_id).await {
                if r == ResponseContent::LogsCancelAccepted {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_resolve_names_to_instances_and_name_the_unknown() {
        let tree = serde_json::json!({"workloadStates": {
            "agent_A": {"web": {"abc": {"state": "Running", "subState": "Ok"}}},
            "agent_B": {"db": {"def": {"state": "Running", "subState": "Ok"}}},
        }});
        let view = StateView::from_tree(&tree).unwrap();
        let found = resolve(&view, &["web".into(), "db".into()]).unwrap();
        assert_eq!(found.iter().map(ToString::to_string).collect::<Vec<_>>(), ["web.abc.agent_A", "db.def.agent_B"]);
        let err = resolve(&view, &["web".into(), "nope".into(), "gone".into()]).unwrap_err();
        assert_eq!(err.to_string(), "Failed to output logs: 'Command failed: 'Workload name 'nope' does not exist.''");
    }

    #[test]
    fn logs_lines_carry_the_name_as_in_ankaios() {
        let n = WorkloadInstanceName::parse("web.abc.agent_A").unwrap();
        assert_eq!(format_line(&n, "hello", false), "hello\n");
        assert_eq!(format_line(&n, "hello", true), "web hello\n");
    }

    #[test]
    fn logs_of_several_instances_carry_names_unasked() {
        assert!(!names_shown(1, false));
        assert!(names_shown(1, true));
        assert!(names_shown(2, false));
    }
}
