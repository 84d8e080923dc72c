//! `ank get events [-o yaml|json] [-c] [MASK...]`: subscribes to changes of
//! the complete state and prints one document per event, as Ankaios' `ank`
//! does: its timestamp (RFC 3339, nanoseconds, `+00:00`), the added,
//! updated and removed fields and the event's state under `completeState`.
//! With `-c` (`--include-current-state`) the state at subscription time is
//! printed first. YAML documents each start with `---`; JSON is one object
//! per line. Runs until interrupted, then cancels the subscription.

use std::time::SystemTime;

use ank_common::field_mask;
use ank_common::messages::{AlteredFields, RequestContent, ResponseContent};
use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::{GetEventsArgs, OutputFormat};
use crate::cmd::Ctx;
use crate::connection::Connection;
use crate::render::shape::{self, ShapeOptions};
use crate::render::{self, Node, yaml};

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

/// `time` the way chrono's `to_rfc3339` writes it (Ankaios' event
/// timestamps): UTC as `+00:00`, with 0, 3, 6 or 9 fraction digits, the
/// fewest that keep the nanoseconds.
pub fn event_timestamp(time: SystemTime) -> String {
    let base = ank_common::timestamp::rfc3339_utc(time);
    let seconds = base.get(..19).unwrap_or(&base);
    let nanos = time.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let fraction = match nanos {
        0 => String::new(),
        n if n % 1_000_000 == 0 => format!(".{:03}", n / 1_000_000),
        n if n % 1_000 == 0 => format!(".{:06}", n / 1_000),
        n => format!(".{n:09}"),
    };
    format!("{seconds}{fraction}+00:00")
}

/// One event (or with `altered: None` the state at subscription time) as
/// printed: the keys in Ankaios' order, empty field lists left out.
pub fn format_event(
    timestamp: &str,
    altered: Option<&AlteredFields>,
    state: &Value,
    opts: &ShapeOptions,
    format: OutputFormat,
) -> String {
    let mut doc = vec![("timestamp".to_owned(), Node::String(timestamp.to_owned()))];
    if let Some(altered) = altered {
        for (key, paths) in [
            ("addedFields", &altered.added_fields),
            ("updatedFields", &altered.updated_fields),
            ("removedFields", &altered.removed_fields),
        ] {
            if !paths.is_empty() {
                doc.push((key.to_owned(), Node::Seq(paths.iter().cloned().map(Node::String).collect())));
            }
        }
    }
    doc.push(("completeState".to_owned(), shape::complete_state(state, opts)));
    let doc = Node::Map(doc);
    match format {
        OutputFormat::Json => format!("{}\n", render::json_line(&doc)),
        OutputFormat::Yaml => format!("---\n{}\n", yaml::to_string(&doc).trim_end()),
    }
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
    let initial = match first {
        ResponseContent::CompleteState(state) => state.to_json()?,
        ResponseContent::Error(e) => bail!("the server rejected the event subscription: {e}"),
        other => bail!("unexpected answer to an event subscription: {other:?}"),
    };
    if ctx.settings.verbose {
        eprintln!("subscribed to events as request {request_id}");
    }
    let opts = ShapeOptions { masks: args.masks.clone(), extensions: false };
    let format = args.output_format.unwrap_or(OutputFormat::Yaml);
    if args.include_current_state {
        ctx.print(&format_event(&event_timestamp(wall_now()), None, &initial, &opts, format))?;
    }
    let result = tokio::select! {
        r = print_events(ctx, &mut conn, &request_id, &opts, format) => r,
        _ = interrupted => Ok(()),
    };
    // Best effort: the subscription also ends when the connection closes.
    let _ = conn.send_request(&request_id, RequestContent::EventsCancel).await;
    conn.goodbye().await;
    result
}

/// The time an event is printed at: the system's wall clock as it is now
/// (the CLI has no daemon clock; a long `ank get events` follows the
/// system's time if it is set while it runs).
#[allow(clippy::disallowed_methods)]
fn wall_now() -> SystemTime {
    SystemTime::now()
}

async fn print_events(
    ctx: &mut Ctx<'_>,
    conn: &mut Connection,
    request_id: &str,
    opts: &ShapeOptions,
    format: OutputFormat,
) -> anyhow::Result<()> {
    loop {
        match conn.next_response(request_id).await? {
            ResponseContent::Event { complete_state, altered_fields } => {
                let now = event_timestamp(wall_now());
                ctx.print(&format_event(&now, Some(&altered_fields), &complete_state, opts, format))?;
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
    fn events_print_as_ankaios_yaml_documents() {
        let t = "2026-11-23T10:00:00.123456789+00:00";
        let state =
            json!({"desiredState": {"apiVersion": "v1", "workloads": {"b": {"agent": "B", "runtime": "podman"}}}});
        let opts = ShapeOptions { masks: vec!["desiredState.workloads".into()], extensions: false };
        let doc = format_event(t, Some(&altered()), &state, &opts, OutputFormat::Yaml);
        assert_eq!(
            doc,
            "---\ntimestamp: 2026-11-23T10:00:00.123456789+00:00\naddedFields:\n- desiredState.workloads.b\n\
             updatedFields:\n- workloadStates.A.a.id.state\nremovedFields:\n- desiredState.workloads.c\n\
             completeState:\n  desiredState:\n    apiVersion: v1\n    workloads:\n      b:\n        agent: B\n\
             \x20       runtime: podman\n"
        );
        let only_added = AlteredFields { added_fields: vec!["agents.A".into()], ..Default::default() };
        let doc = format_event(t, Some(&only_added), &json!({}), &opts, OutputFormat::Yaml);
        assert_eq!(doc, format!("---\ntimestamp: {t}\naddedFields:\n- agents.A\ncompleteState: {{}}\n"));
        let current = format_event(t, None, &state, &opts, OutputFormat::Yaml);
        assert!(current.starts_with(&format!("---\ntimestamp: {t}\ncompleteState:\n  desiredState:\n")), "{current}");
    }

    #[test]
    fn events_print_as_ankaios_json_lines() {
        let t = "2026-11-23T10:00:00.5+00:00";
        let line =
            format_event(t, Some(&altered()), &json!({"agents": {}}), &ShapeOptions::default(), OutputFormat::Json);
        assert_eq!(
            line,
            format!(
                "{{\"timestamp\":\"{t}\",\"addedFields\":[\"desiredState.workloads.b\"],\
                 \"updatedFields\":[\"workloadStates.A.a.id.state\"],\"removedFields\":[\"desiredState.workloads.c\"],\
                 \"completeState\":{{\"agents\":{{}}}}}}\n"
            )
        );
    }

    #[test]
    fn events_timestamps_are_chrono_rfc3339() {
        let at = |secs: u64, nanos: u32| SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, nanos);
        assert_eq!(event_timestamp(at(1_795_428_000, 123_456_789)), "2026-11-23T10:00:00.123456789+00:00");
        assert_eq!(event_timestamp(at(1_795_428_000, 120_000_000)), "2026-11-23T10:00:00.120+00:00");
        assert_eq!(event_timestamp(at(1_795_428_000, 123_456_000)), "2026-11-23T10:00:00.123456+00:00");
        assert_eq!(event_timestamp(at(1_795_428_000, 0)), "2026-11-23T10:00:00+00:00");
    }
}
