//! `ank get events [-o yaml|json] [-c] [MASK...]`: subscribes to changes of
//! the complete state and prints one document per event (timestamp, added,
//! updated and removed fields; with `-c` also the current state under the
//! masks) until interrupted, then cancels the subscription. YAML documents
//! are separated by `---`; JSON is one object per line.

use ank_common::field_mask;
use ank_common::messages::{AlteredFields, RequestContent, ResponseContent};
use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::{GetEventsArgs, OutputFormat};
use crate::cmd::Ctx;
use crate::connection::Connection;

/// The state a `-c` subscriber sees: the first answer, then every event
/// merged in.
#[derive(Debug, Default)]
pub struct CurrentState(pub Value);

impl CurrentState {
    /// Sets the added and updated paths to their new values and drops the
    /// removed ones.
    pub fn apply(&mut self, event_state: &Value, altered: &AlteredFields) {
        let paths: Vec<String> = altered
            .added_fields
            .iter()
            .chain(&altered.updated_fields)
            .chain(&altered.removed_fields)
            .cloned()
            .collect();
        field_mask::apply_update(&mut self.0, event_state, &paths);
    }
}

/// One event as printed.
pub fn format_event(
    timestamp: &str,
    altered: &AlteredFields,
    state: Option<&Value>,
    format: OutputFormat,
    first: bool,
) -> anyhow::Result<String> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Doc<'a> {
        timestamp: &'a str,
        #[serde(flatten)]
        altered: &'a AlteredFields,
        #[serde(skip_serializing_if = "Option::is_none")]
        complete_state: Option<&'a Value>,
    }
    let doc = Doc { timestamp, altered, complete_state: state };
    Ok(match format {
        OutputFormat::Json => format!("{}\n", serde_json::to_string(&doc).context("cannot render the event as JSON")?),
        OutputFormat::Yaml => {
            let body = serde_saphyr::to_string(&doc).context("cannot render the event as YAML")?;
            let sep = if first { "" } else { "---\n" };
            format!("{sep}{body}{}", if body.ends_with('\n') { "" } else { "\n" })
        }
    })
}

/// Prints events until Ctrl-C or until the server ends the stream.
pub async fn run(ctx: &mut Ctx<'_>, args: GetEventsArgs) -> anyhow::Result<()> {
    let interrupted = crate::signals::termination();
    let mut conn = ctx.connect().await?;
    let request_id = conn.new_request_id();
    let request = RequestContent::CompleteState { field_mask: args.masks.clone(), subscribe_for_events: true };
    conn.send_request(&request_id, request).await?;
    let first = tokio::time::timeout(ctx.settings.response_timeout, conn.next_response(&request_id))
        .await
        .context("no answer to the event subscription")??;
    let mut current = match first {
        ResponseContent::CompleteState(tree) => CurrentState(*tree),
        ResponseContent::Error(e) => bail!("the server rejected the event subscription: {e}"),
        other => bail!("unexpected answer to an event subscription: {other:?}"),
    };
    if ctx.settings.verbose {
        eprintln!("subscribed to events as request {request_id}");
    }
    let result = tokio::select! {
        r = print_events(ctx, &mut conn, &request_id, &args, &mut current) => r,
        _ = interrupted => Ok(()),
    };
    // Best effort: the subscription also ends when the connection closes.
    let _ = conn.send_request(&request_id, RequestContent::EventsCancel).await;
    conn.goodbye().await;
    result
}

async fn print_events(
    ctx: &mut Ctx<'_>,
    conn: &mut Connection,
    request_id: &str,
    args: &GetEventsArgs,
    current: &mut CurrentState,
) -> anyhow::Result<()> {
    let mut first = true;
    loop {
        match conn.next_response(request_id).await? {
            ResponseContent::Event { complete_state, altered_fields } => {
                // The current state is kept only when it is printed.
                if args.include_current_state {
                    current.apply(&complete_state, &altered_fields);
                }
                let state = args.include_current_state.then_some(&current.0);
                let now = ank_common::timestamp::now_rfc3339();
                ctx.print(&format_event(
                    &now,
                    &altered_fields,
                    state,
                    args.output_format.unwrap_or(OutputFormat::Yaml),
                    first,
                )?)?;
                first = false;
            }
            ResponseContent::Error(e) => bail!("the event subscription failed: {e}"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn altered() -> AlteredFields {
        AlteredFields {
            added_fields: vec!["desiredState.workloads.b".into()],
            updated_fields: vec!["workloadStates.A.a.id.state".into()],
            removed_fields: vec!["desiredState.workloads.c".into()],
        }
    }

    #[test]
    fn current_state_follows_events() {
        let mut cur = CurrentState(json!({"desiredState": {"workloads": {"a": {"agent": "A"}, "c": {"agent": "C"}}},
            "workloadStates": {"A": {"a": {"id": {"state": "Pending"}}}}}));
        let event = json!({"desiredState": {"workloads": {"b": {"agent": "B"}}},
            "workloadStates": {"A": {"a": {"id": {"state": "Running"}}}}});
        cur.apply(&event, &altered());
        assert_eq!(
            cur.0,
            json!({"desiredState": {"workloads": {"a": {"agent": "A"}, "b": {"agent": "B"}}},
                "workloadStates": {"A": {"a": {"id": {"state": "Running"}}}}})
        );
    }

    #[test]
    fn events_print_as_yaml_documents_or_json_lines() {
        let t = "2026-11-23T10:00:00.000Z";
        let first = format_event(t, &altered(), None, OutputFormat::Yaml, true).unwrap();
        assert!(first.starts_with("timestamp: \"2026-11-23T10:00:00.000Z\"\naddedFields:\n"), "{first}");
        assert!(first.contains("addedFields:\n- desiredState.workloads.b\n"), "{first}");
        assert!(!first.contains("completeState"));
        let second = format_event(t, &altered(), Some(&json!({"x": 1})), OutputFormat::Yaml, false).unwrap();
        assert!(second.starts_with("---\ntimestamp:") && second.contains("completeState:\n  x: 1\n"), "{second}");
        let line = format_event(t, &altered(), None, OutputFormat::Json, true).unwrap();
        assert_eq!(line.lines().count(), 1);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["removedFields"][0], "desiredState.workloads.c");
        assert_eq!(v["timestamp"], t);
    }
}
