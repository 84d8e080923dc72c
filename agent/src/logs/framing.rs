//! Sizes the log lines going to the server as Ankaios does: a batch whose
//! `LogEntriesResponse` encodes to more than [`MAX_RESPONSE_BYTES`] (2 MiB) is
//! split into several responses of at most that size, in order; a single
//! entry larger than that is cut (at a character boundary, marked with
//! [`TRUNCATION_NOTICE`]) and followed by an entry saying so, both in one
//! response of their own. Nothing is dropped for its size.

use ank_common::convert::instance_name_to_proto;
use ank_common::messages::LogEntry;
use ank_proto::ank_base as pb;
use prost::Message;

/// Largest encoded `LogEntriesResponse` sent to the server.
pub const MAX_RESPONSE_BYTES: usize = 2 * 1024 * 1024;

/// Appended to a message that was cut.
pub const TRUNCATION_NOTICE: &str = " [truncated]";

/// The text of the entry that follows a cut message.
pub const TRUNCATED_INFO: &str = "The previous message was truncated due to exceeding the maximum 2 MB size.";

/// Room left for the tags and length prefixes of the two entries of a
/// truncated response (Ankaios' margin).
const REPEATED_FIELD_OVERHEAD: usize = 10;

/// The responses (each a list of entries) to send for `entries`.
pub fn frame(entries: Vec<LogEntry>) -> Vec<Vec<LogEntry>> {
    if response_len(&entries) <= MAX_RESPONSE_BYTES {
        return vec![entries];
    }
    let mut responses = Vec::new();
    let mut current: Vec<LogEntry> = Vec::new();
    for entry in entries {
        let size = entry_len(&entry);
        if size > MAX_RESPONSE_BYTES {
            if !current.is_empty() {
                responses.push(std::mem::take(&mut current));
            }
            responses.push(truncate(entry));
        } else if response_len(&current) + size > MAX_RESPONSE_BYTES {
            if !current.is_empty() {
                responses.push(std::mem::take(&mut current));
            }
            current.push(entry);
        } else {
            current.push(entry);
        }
    }
    if !current.is_empty() {
        responses.push(current);
    }
    responses
}

/// The cut entry and the entry telling so.
fn truncate(entry: LogEntry) -> Vec<LogEntry> {
    let info = LogEntry { workload_name: entry.workload_name.clone(), message: TRUNCATED_INFO.to_owned() };
    let overhead = entry_len(&entry) - entry.message.len();
    let room = MAX_RESPONSE_BYTES
        .saturating_sub(overhead)
        .saturating_sub(TRUNCATION_NOTICE.len())
        .saturating_sub(entry_len(&info))
        .saturating_sub(REPEATED_FIELD_OVERHEAD);
    let LogEntry { workload_name, mut message } = entry;
    if room < message.len() {
        let mut end = room;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push_str(TRUNCATION_NOTICE);
    }
    vec![LogEntry { workload_name, message }, info]
}

fn to_pb(entry: &LogEntry) -> pb::LogEntry {
    pb::LogEntry { workload_name: Some(instance_name_to_proto(&entry.workload_name)), message: entry.message.clone() }
}

/// Encoded size of one entry (without its tag and length in a response).
fn entry_len(entry: &LogEntry) -> usize {
    to_pb(entry).encoded_len()
}

/// Encoded size of a response holding `entries`.
fn response_len(entries: &[LogEntry]) -> usize {
    pb::LogEntriesResponse { log_entries: entries.iter().map(to_pb).collect() }.encoded_len()
}

#[cfg(test)]
mod tests {
    use ank_common::{AgentName, WorkloadInstanceName, WorkloadName};

    use super::*;

    fn entry(message: String) -> LogEntry {
        let name =
            WorkloadInstanceName::new(&WorkloadName::new("web").unwrap(), &AgentName::new("agent_A").unwrap(), "c");
        LogEntry { workload_name: name, message }
    }

    #[test]
    fn log_framing_keeps_a_small_batch_as_it_is() {
        let entries = vec![entry("one".into()), entry("two".into())];
        assert_eq!(frame(entries.clone()), vec![entries]);
        assert_eq!(frame(Vec::new()), vec![Vec::<LogEntry>::new()]);
    }

    #[test]
    fn log_framing_splits_a_large_batch_in_order_without_losing_lines() {
        // Five lines of 900 KiB: two fit in 2 MiB, a third does not.
        let lines: Vec<String> = (0..5).map(|i| char::from(b'a' + i).to_string().repeat(900 * 1024)).collect();
        let responses = frame(lines.iter().cloned().map(entry).collect());
        let sizes: Vec<usize> = responses.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 2, 1]);
        for r in &responses {
            assert!(response_len(r) <= MAX_RESPONSE_BYTES, "{}", response_len(r));
        }
        let sent: Vec<String> = responses.into_iter().flatten().map(|e| e.message).collect();
        assert_eq!(sent, lines);
    }

    #[test]
    fn log_framing_cuts_a_line_over_2_mib_and_says_so() {
        let long = "é".repeat(3 * 1024 * 1024); // 6 MiB of two-byte characters
        let responses = frame(vec![entry("before".into()), entry(long.clone()), entry("after".into())]);
        assert_eq!(responses.len(), 3);
        assert_eq!(responses[0], vec![entry("before".into())]);
        assert_eq!(responses[2], vec![entry("after".into())]);
        let [cut, info] = responses[1].as_slice() else { panic!("{}", responses[1].len()) };
        assert_eq!(info.message, "The previous message was truncated due to exceeding the maximum 2 MB size.");
        let kept = cut.message.strip_suffix(" [truncated]").expect("marked");
        assert!(long.starts_with(kept));
        assert!(response_len(&responses[1]) <= MAX_RESPONSE_BYTES);
        // As much as fits: the room Ankaios computes, rounded down to a
        // character boundary.
        let overhead = entry_len(&entry(long.clone())) - long.len();
        let info_len = entry_len(info);
        let room = MAX_RESPONSE_BYTES - overhead - " [truncated]".len() - info_len - 10;
        assert_eq!(kept.len(), room - room % 2);
    }
}
