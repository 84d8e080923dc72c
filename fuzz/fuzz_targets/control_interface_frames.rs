//! Fuzzes what a workload can send on its control interface: a byte
//! stream, cut into the pieces a pipe read could deliver, goes through the
//! agent's [`FrameDecoder`] and every whole frame into a [`Session`], as
//! the pipe task does.
//!
//! Input layout: byte 0 picks the frame limit (bits 0-2) and the access
//! rules (bits 3-4); byte 1 the number `n` of chunk sizes (1-8); the next
//! `n` bytes the chunk sizes (1-256, used in turn); the rest is the stream.
//!
//! Invariants checked: no panic; frame boundaries and lengths agree with
//! prost's length-delimited decoding; a decoder error is only reported for
//! a prefix that is too long or beyond 64 bits or a length above the
//! limit, and while none is reported the decoder never holds more than the
//! limit plus a prefix; the session answers each frame as its protocol
//! says (Hello first, one forward or one error response per request, the
//! `<workload>@` prefix, nothing beyond the access rules); a
//! ConnectionClosed always comes with StopReading and after it the session
//! produces no further actions.

#![no_main]

use ank_agent::control_interface::authorizer::Authorizer;
use ank_agent::control_interface::framing::{FrameDecoder, FrameError, MAX_FRAME_LEN, MAX_VARINT_LEN};
use ank_agent::control_interface::session::{Action, Session};
use ank_common::messages::{Request, RequestContent};
use ank_common::workload::{AccessRule, ControlInterfaceAccess, ReadWrite};
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use ank_proto::{ank_base as pb, ank_base::response::ResponseContent};
use libfuzzer_sys::fuzz_target;
use prost::Message;

const WORKLOAD: &str = "fuzz_wl";
const LIMITS: [usize; 8] = [0, 1, 16, 64, 300, 1024, 64 * 1024, MAX_FRAME_LEN];

fuzz_target!(|data: &[u8]| {
    let Some((&config, rest)) = data.split_first() else { return };
    let Some((&n, rest)) = rest.split_first() else { return };
    let n = usize::from(n & 7) + 1;
    if rest.len() < n {
        return;
    }
    let (sizes, stream) = rest.split_at(n);
    let limit = LIMITS[usize::from(config & 7)];
    let rules = usize::from((config >> 3) & 3);
    Harness::new(limit, rules).run(sizes, stream);
});

/// The decoder and session under test and what the harness knows so far.
struct Harness {
    decoder: FrameDecoder,
    session: Session,
    limit: usize,
    rules: usize,
    accepted: bool,
    closed: bool,
}

impl Harness {
    fn new(limit: usize, rules: usize) -> Self {
        let session = Session::new(WORKLOAD, Authorizer::new(access_rules(rules)));
        Self { decoder: FrameDecoder::new(limit), session, limit, rules, accepted: false, closed: false }
    }

    fn run(mut self, sizes: &[u8], stream: &[u8]) {
        // Where the next frame starts in `stream`.
        let mut start = 0;
        let mut offset = 0;
        for size in sizes.iter().map(|s| usize::from(*s) + 1).cycle() {
            if offset >= stream.len() {
                break;
            }
            let end = stream.len().min(offset + size);
            self.decoder.push(&stream[offset..end]);
            offset = end;
            loop {
                match self.decoder.next_frame() {
                    Ok(Some(frame)) => {
                        start = check_frame(&stream[start..offset], &frame) + start;
                        self.frame(&frame);
                    }
                    Ok(None) => {
                        let held = self.decoder.buffered();
                        assert_eq!(held, offset - start, "the decoder holds exactly the unframed bytes");
                        assert!(held < self.limit + MAX_VARINT_LEN, "{held} bytes held, limit {}", self.limit);
                        break;
                    }
                    Err(e) => {
                        check_error(&stream[start..offset], &e, self.limit);
                        // As the pipe task: say why and stop reading.
                        if !self.closed {
                            let actions = self.session.close(format!("invalid frame: {e}"));
                            self.check_closed(&actions);
                        }
                        return;
                    }
                }
            }
        }
    }

    /// Feeds one frame to the session and checks its answer against what
    /// the frame is.
    fn frame(&mut self, frame: &[u8]) {
        let actions = self.session.on_frame(frame);
        if self.closed {
            assert!(actions.is_empty(), "actions after ConnectionClosed: {actions:?}");
            return;
        }
        let decoded = ci::ToAnkaios::decode(frame).ok();
        // After the Hello, as in Ankaios, a frame that is no ToAnkaios or a
        // message of an unknown kind is skipped: no answer, still accepted.
        if self.accepted && decoded.as_ref().is_none_or(|m| m.to_ankaios_enum.is_none()) {
            assert!(actions.is_empty(), "skipped after the Hello: {actions:?}");
            assert!(self.session.is_accepted());
            return;
        }
        let message = decoded.and_then(|m| m.to_ankaios_enum);
        match message {
            Some(ToAnkaiosEnum::Hello(h)) if ank_common::is_compatible_protocol(&h.protocol_version) => {
                assert!(
                    matches!(actions.as_slice(), [Action::Reply(m)]
                        if matches!(m.from_ankaios_enum, Some(FromAnkaiosEnum::ControlInterfaceAccepted(_)))),
                    "a good Hello is accepted: {actions:?}"
                );
                self.accepted = true;
            }
            Some(ToAnkaiosEnum::Request(request)) if self.accepted => self.check_request(request, &actions),
            // Before the Hello: undecodable, empty or a request; at any time: a bad Hello.
            _ => self.check_closed(&actions),
        }
        assert_eq!(self.accepted && !self.closed, self.session.is_accepted());
    }

    fn check_closed(&mut self, actions: &[Action]) {
        assert!(
            matches!(actions, [Action::Reply(m), Action::StopReading]
                if matches!(m.from_ankaios_enum, Some(FromAnkaiosEnum::ConnectionClosed(_)))),
            "expected ConnectionClosed and StopReading: {actions:?}"
        );
        self.closed = true;
    }

    /// One request: forwarded with the prefix, or answered with an error
    /// under its own id; never beyond the rules.
    fn check_request(&self, request: pb::Request, actions: &[Action]) {
        let id = request.request_id.clone();
        match actions {
            [Action::Forward(forwarded)] => {
                assert_eq!(forwarded.request_id, format!("{WORKLOAD}@{id}"));
                assert!(allowed_by_rules(self.rules, forwarded), "rules {} forwarded {forwarded:?}", self.rules);
            }
            [Action::Reply(m)] => match &m.from_ankaios_enum {
                Some(FromAnkaiosEnum::Response(r)) => {
                    assert_eq!(r.request_id, id);
                    assert!(matches!(r.response_content, Some(ResponseContent::Error(_))), "{r:?}");
                }
                other => panic!("a request answered with {other:?}"),
            },
            _ => panic!("a request must give one action: {actions:?}"),
        }
    }
}

/// `frame` was cut from the start of `bytes`: its prefix must be what prost
/// reads there. Returns the bytes used (prefix and body).
fn check_frame(bytes: &[u8], frame: &[u8]) -> usize {
    let len = prost::decode_length_delimiter(bytes).expect("prost reads the prefix the decoder read");
    assert_eq!(len, frame.len());
    let prefix = bytes.iter().position(|b| b & 0x80 == 0).expect("a complete prefix") + 1;
    assert_eq!(&bytes[prefix..prefix + len], frame);
    prefix + len
}

/// A decoder error for the bytes from the start of the current frame.
fn check_error(bytes: &[u8], error: &FrameError, limit: usize) {
    match error {
        FrameError::PrefixTooLong => {
            assert!(bytes.len() >= MAX_VARINT_LEN && bytes[..MAX_VARINT_LEN].iter().all(|b| b & 0x80 != 0));
        }
        FrameError::PrefixOverflow => {
            assert!(bytes.len() >= MAX_VARINT_LEN && bytes[..MAX_VARINT_LEN - 1].iter().all(|b| b & 0x80 != 0));
            assert!(bytes[MAX_VARINT_LEN - 1] > 1 && bytes[MAX_VARINT_LEN - 1] & 0x80 == 0);
            assert!(prost::decode_length_delimiter(bytes).is_err());
        }
        FrameError::TooLarge { len, max } => {
            assert_eq!(*max, limit);
            let decoded = prost::decode_length_delimiter(bytes).expect("prost reads the prefix the decoder read");
            assert_eq!(decoded as u64, *len);
            assert!(*len > limit as u64);
        }
    }
}

fn state_rule(operation: ReadWrite, masks: &[&str]) -> AccessRule {
    AccessRule::StateRule { operation, filter_masks: masks.iter().map(|m| (*m).to_owned()).collect() }
}

fn log_rule(names: &[&str]) -> AccessRule {
    AccessRule::LogRule { workload_names: names.iter().map(|m| (*m).to_owned()).collect() }
}

fn access_rules(set: usize) -> ControlInterfaceAccess {
    let (allow_rules, deny_rules) = match set {
        0 => (vec![state_rule(ReadWrite::Read, &["workloadStates"])], vec![]),
        1 => (
            vec![state_rule(ReadWrite::ReadWrite, &["*"])],
            vec![state_rule(ReadWrite::Write, &["desiredState.workloads.secret"])],
        ),
        2 => (
            vec![
                state_rule(ReadWrite::ReadWrite, &["desiredState"]),
                state_rule(ReadWrite::Read, &["workloadStates"]),
                log_rule(&["app*"]),
            ],
            vec![log_rule(&["app_secret"])],
        ),
        _ => (vec![log_rule(&["*"])], vec![]),
    };
    ControlInterfaceAccess { allow_rules, deny_rules }
}

/// What each rule set may let through, stated without the authorizer's
/// matching code.
fn allowed_by_rules(set: usize, request: &Request) -> bool {
    let under = |masks: &[String], roots: &[&str]| {
        !masks.is_empty() && masks.iter().all(|m| roots.iter().any(|r| m.split('.').next() == Some(r)))
    };
    match (&request.content, set) {
        (RequestContent::LogsCancel | RequestContent::EventsCancel, _) => true,
        // The rendered state is read like the complete state.
        (RequestContent::CompleteState { field_mask, .. } | RequestContent::RenderedState { field_mask }, 0) => {
            under(field_mask, &["workloadStates"])
        }
        (RequestContent::CompleteState { field_mask, .. } | RequestContent::RenderedState { field_mask }, 2) => {
            under(field_mask, &["workloadStates", "desiredState"])
        }
        // The deny rule blocks the secret and every path above it.
        (RequestContent::UpdateState { update_mask, .. }, 1) => !update_mask.iter().any(|m| {
            let path: Vec<&str> = m.split('.').collect();
            path.len() <= 3 && path.iter().zip(["desiredState", "workloads", "secret"]).all(|(p, s)| *p == s)
        }),
        (RequestContent::UpdateState { update_mask, .. }, 2) => under(update_mask, &["desiredState"]),
        (RequestContent::Logs(logs), 2) => {
            logs.workload_names.iter().all(|n| n.workload_name.starts_with("app") && n.workload_name != "app_secret")
        }
        (RequestContent::CompleteState { .. } | RequestContent::RenderedState { .. }, 1)
        | (RequestContent::Logs(_), 3) => true,
        (RequestContent::Logs(logs), _) => logs.workload_names.is_empty(),
        _ => false,
    }
}
