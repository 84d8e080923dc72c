//! One workload's conversation on its control interface, without I/O: the
//! handshake (the first frame must be a Hello of our major protocol
//! version), the decoding and authorizing of requests, the `<workload>@`
//! prefix on request ids towards the server and its removal on the way
//! back, and the streams (logs, event subscriptions) the workload has
//! open, so they can be cancelled when it goes. The pipe tasks feed it
//! frames and responses and carry out its [`Action`]s.

use std::collections::HashMap;

use ank_common::messages::{Request, RequestContent, Response, ResponseContent};
use ank_common::messages::{request_from_pb, response_to_pb};
use ank_proto::control_api::{self as ci, from_ankaios::FromAnkaiosEnum, to_ankaios::ToAnkaiosEnum};
use prost::Message;

use super::authorizer::Authorizer;
use crate::probes::self_report::SelfReports;

/// The error a workload gets for a request its rules do not allow (the
/// reason goes to the agent's log only), as Ankaios words it.
const ACCESS_DENIED: &str = "Access denied";

/// What the session asks the pipe tasks to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Write this message to the workload's `input` pipe.
    Reply(Box<ci::FromAnkaios>),
    /// Send this request (id already prefixed) to the server.
    Forward(Request),
    /// Stop reading the `output` pipe (after a ConnectionClosed).
    StopReading,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitingHello,
    Accepted,
    Closed,
}

/// A request whose responses keep coming until it is cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stream {
    Logs,
    Events,
}

/// Ankaios' reason when the first frame is no protobuf `ToAnkaios`.
const DECODE_FAILED: &str = "Could not decode protobuf data";
/// Ankaios' reason when the first message is not a Hello.
const HELLO_MISSING: &str = "Initial Hello missing!";

/// The state of one workload's control interface.
#[derive(Debug)]
pub struct Session {
    workload: String,
    authorizer: Authorizer,
    phase: Phase,
    /// Open streams by the workload's request id (without the prefix).
    streams: HashMap<String, Stream>,
    /// Where the workload's own health reports go.
    self_reports: SelfReports,
}

impl Session {
    pub fn new(workload: impl Into<String>, authorizer: Authorizer) -> Self {
        Self {
            workload: workload.into(),
            authorizer,
            phase: Phase::AwaitingHello,
            streams: HashMap::new(),
            self_reports: SelfReports::default(),
        }
    }

    /// Records the workload's health reports in `reports`.
    pub fn with_self_reports(mut self, reports: SelfReports) -> Self {
        self.self_reports = reports;
        self
    }

    /// Whether requests are accepted now.
    pub fn is_accepted(&self) -> bool {
        self.phase == Phase::Accepted
    }

    /// Handles one frame read from the workload.
    // [impl->swdd~agent-converts-control-interface-message-to-ankaios-object~1]
    pub fn on_frame(&mut self, frame: &[u8]) -> Vec<Action> {
        if self.phase == Phase::Closed {
            return Vec::new();
        }
        // The texts and the leniency after the Hello are Ankaios': a frame
        // that cannot be used once the session is accepted is logged and
        // skipped, so a client speaking a newer protocol is not cut off.
        let message = match (self.phase, ci::ToAnkaios::decode(frame)) {
            (_, Ok(m)) => m.to_ankaios_enum,
            (Phase::AwaitingHello, Err(e)) => {
                tracing::debug!("workload '{}': first frame: {e}", self.workload);
                return self.close(DECODE_FAILED.to_owned());
            }
            (_, Err(e)) => {
                tracing::warn!("workload '{}': skipping a frame that is no ToAnkaios: {e}", self.workload);
                return Vec::new();
            }
        };
        match (self.phase, message) {
            (_, Some(ToAnkaiosEnum::Hello(hello))) => self.hello(&hello.protocol_version),
            (Phase::AwaitingHello, _) => self.close(HELLO_MISSING.to_owned()),
            (_, Some(ToAnkaiosEnum::Request(request))) => self.request(request),
            (_, Some(ToAnkaiosEnum::HealthReport(report))) => self.health(report),
            (_, None) => {
                tracing::warn!("workload '{}': skipping a message of a kind this agent does not know", self.workload);
                Vec::new()
            }
        }
    }

    fn hello(&mut self, version: &str) -> Vec<Action> {
        if let Err(refusal) = ank_common::version::check_compatibility(version) {
            return self.close(refusal.into());
        }
        self.phase = Phase::Accepted;
        vec![Action::Reply(Box::new(ci::FromAnkaios {
            from_ankaios_enum: Some(FromAnkaiosEnum::ControlInterfaceAccepted(ci::ControlInterfaceAccepted {})),
        }))]
    }

    /// Ends the conversation with `reason` (a bad first message, a broken frame).
    pub fn close(&mut self, reason: String) -> Vec<Action> {
        tracing::warn!("workload '{}': control interface closed: {reason}", self.workload);
        self.phase = Phase::Closed;
        vec![
            Action::Reply(Box::new(ci::FromAnkaios {
                from_ankaios_enum: Some(FromAnkaiosEnum::ConnectionClosed(ci::ConnectionClosed { reason })),
            })),
            Action::StopReading,
        ]
    }

    /// A report of the workload's own health (an extension request; no
    /// allow rule needed, and it can name no other workload).
    // [feature H6: self-reported health]
    fn health(&mut self, report: ci::HealthReport) -> Vec<Action> {
        match self.self_reports.record(&self.workload, report.healthy, &report.message) {
            Ok(()) => {
                tracing::trace!("workload '{}' reports itself healthy: {}", self.workload, report.healthy);
                Vec::new()
            }
            Err(e) => {
                tracing::info!("workload '{}': refusing its health report: {e}", self.workload);
                vec![error_reply(&report.request_id, format!("invalid health report: {e}"))]
            }
        }
    }

    fn request(&mut self, request: ank_proto::ank_base::Request) -> Vec<Action> {
        let id = request.request_id.clone();
        let request = match request_from_pb(request) {
            Ok(r) => r,
            Err(e) => return vec![error_reply(&id, format!("invalid request: {e}"))],
        };
        if let Err(denied) = self.authorizer.authorize(&request.content) {
            tracing::info!("workload '{}': denying request '{id}': {denied}", self.workload);
            return vec![error_reply(&id, ACCESS_DENIED.to_owned())];
        }
        match &request.content {
            RequestContent::Logs(_) => {
                self.streams.insert(id.clone(), Stream::Logs);
            }
            RequestContent::CompleteState { subscribe_for_events: true, .. } => {
                self.streams.insert(id.clone(), Stream::Events);
            }
            RequestContent::LogsCancel | RequestContent::EventsCancel => {
                self.streams.remove(&id);
            }
            RequestContent::CompleteState { .. }
            | RequestContent::UpdateState { .. }
            | RequestContent::JobRerun { .. }
            | RequestContent::JobInterrupt { .. }
            | RequestContent::RenderedState { .. } => {}
        }
        vec![self.forward(&id, request.content)]
    }

    // [impl->swdd~agent-adds-workload-prefix-id-control-interface-request~1]
    // [impl->swdd~agent-forward-request-from-control-interface-pipe-to-server~1]
    fn forward(&self, id: &str, content: RequestContent) -> Action {
        Action::Forward(Request { request_id: format!("{}@{id}", self.workload), content })
    }

    /// Notes a response on its way to the workload (prefix removed): an
    /// error or a cancel confirmation ends the stream of its id.
    pub fn on_response(&mut self, response: &Response) {
        if matches!(
            response.content,
            ResponseContent::Error(_) | ResponseContent::LogsCancelAccepted | ResponseContent::EventsCancelAccepted
        ) {
            self.streams.remove(&response.request_id);
        }
    }

    /// The workload is gone (deleted, or it stopped reading): requests to
    /// the server cancelling every stream it has open.
    pub fn cancel_streams(&mut self) -> Vec<Action> {
        let mut streams: Vec<_> = self.streams.drain().collect();
        streams.sort();
        streams
            .into_iter()
            .map(|(id, stream)| {
                let content = match stream {
                    Stream::Logs => RequestContent::LogsCancel,
                    Stream::Events => RequestContent::EventsCancel,
                };
                self.forward(&id, content)
            })
            .collect()
    }
}

fn error_reply(request_id: &str, message: String) -> Action {
    let response = Response { request_id: request_id.to_owned(), content: ResponseContent::Error(message) };
    Action::Reply(Box::new(response_message(&response)))
}

/// For a response from the server: the workload it belongs to and the
/// response with the prefix removed. `None` if the id carries no workload
/// prefix (the response is not for a control interface).
// [impl->swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1]
// [impl->swdd~agent-remove-id-prefix-forwarding-control-interface-response~1]
pub fn route_response(response: &Response) -> Option<(String, Response)> {
    let (workload, id) = response.request_id.split_once('@')?;
    Some((workload.to_owned(), Response { request_id: id.to_owned(), content: response.content.clone() }))
}

/// The message for the workload's `input` pipe carrying `response`.
pub fn response_message(response: &Response) -> ci::FromAnkaios {
    ci::FromAnkaios { from_ankaios_enum: Some(FromAnkaiosEnum::Response(response_to_pb(response))) }
}

#[cfg(test)]
mod tests {
    use ank_common::messages::RequestContent;
    use ank_common::workload::{AccessRule, ControlInterfaceAccess, ReadWrite};
    use ank_proto::ank_base as pb;

    use super::*;

    fn session() -> Session {
        let rule = AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["desiredState".into()] };
        Session::new("app", Authorizer::new(ControlInterfaceAccess { allow_rules: vec![rule], deny_rules: vec![] }))
    }

    fn hello(v: &str) -> Vec<u8> {
        ci::ToAnkaios { to_ankaios_enum: Some(ToAnkaiosEnum::Hello(ci::Hello { protocol_version: v.into() })) }
            .encode_to_vec()
    }

    fn state_request(id: &str, mask: &str) -> Vec<u8> {
        let request = pb::Request {
            request_id: id.into(),
            request_content: Some(pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                field_mask: vec![mask.into()],
                subscribe_for_events: false,
            })),
        };
        ci::ToAnkaios { to_ankaios_enum: Some(ToAnkaiosEnum::Request(request)) }.encode_to_vec()
    }

    fn reply(action: &Action) -> Option<&FromAnkaiosEnum> {
        match action {
            Action::Reply(m) => m.from_ankaios_enum.as_ref(),
            _ => None,
        }
    }

    fn closed_reason(actions: &[Action]) -> Option<String> {
        actions.iter().find_map(|a| match reply(a) {
            Some(FromAnkaiosEnum::ConnectionClosed(c)) => Some(c.reason.clone()),
            _ => None,
        })
    }

    #[test]
    // [utest->swdd~agent-converts-control-interface-message-to-ankaios-object~1]
    // [utest->swdd~agent-adds-workload-prefix-id-control-interface-request~1]
    fn hello_then_allowed_requests_are_forwarded_with_the_prefix() {
        let mut s = session();
        let accepted = s.on_frame(&hello("1.0.0"));
        assert_eq!(accepted.len(), 1);
        assert!(matches!(reply(&accepted[0]), Some(FromAnkaiosEnum::ControlInterfaceAccepted(_))));
        let actions = s.on_frame(&state_request("r1", "desiredState.workloads"));
        let [Action::Forward(req)] = actions.as_slice() else { panic!("{actions:?}") };
        assert_eq!(req.request_id, "app@r1");
        assert!(matches!(req.content, RequestContent::CompleteState { .. }));
        // Denied: an error response under the workload's own id.
        let actions = s.on_frame(&state_request("r2", "workloadStates"));
        let [action] = actions.as_slice() else { panic!("{actions:?}") };
        let Some(FromAnkaiosEnum::Response(r)) = reply(action) else { panic!("{actions:?}") };
        assert_eq!(r.request_id, "r2");
        assert!(
            matches!(&r.response_content, Some(pb::response::ResponseContent::Error(e)) if e.message == "Access denied")
        );
        assert!(s.is_accepted());
    }

    #[test]
    fn a_wrong_first_message_or_version_closes_the_connection_with_ankaios_reason() {
        let mut s = session();
        let actions = s.on_frame(&state_request("r1", "desiredState"));
        assert_eq!(closed_reason(&actions).as_deref(), Some("Initial Hello missing!"));
        assert!(actions.contains(&Action::StopReading));
        assert!(s.on_frame(&hello("1.0.0")).is_empty(), "a closed pipe is not read any more");

        let mut s = session();
        let reason = closed_reason(&s.on_frame(&hello("2.0.0"))).unwrap();
        assert_eq!(reason, "Unsupported protocol version '2.0.0'. Currently supported '1'");
        let mut s = session();
        let reason = closed_reason(&s.on_frame(&[0xff, 0xff, 0xff])).unwrap();
        assert_eq!(reason, "Could not decode protobuf data");
    }

    #[test]
    fn after_the_hello_garbage_and_unknown_kinds_are_skipped_and_the_session_goes_on() {
        let mut s = session();
        s.on_frame(&hello("1.0.0"));
        assert_eq!(s.on_frame(&[0xff, 0xff, 0xff]), Vec::new());
        // A message whose only field is one we do not know (field 9).
        assert_eq!(s.on_frame(&[0x4a, 0x00]), Vec::new());
        assert!(s.is_accepted());
        let actions = s.on_frame(&state_request("r1", "desiredState.workloads"));
        assert!(matches!(actions.as_slice(), [Action::Forward(_)]), "{actions:?}");
    }

    #[test]
    // [utest->swdd~agent-uses-id-prefix-forward-control-interface-response-correct-workload~1]
    // [utest->swdd~agent-remove-id-prefix-forwarding-control-interface-response~1]
    fn responses_are_routed_by_prefix_and_stripped() {
        let response = Response { request_id: "app@r1".into(), content: ResponseContent::EventsCancelAccepted };
        let (workload, stripped) = route_response(&response).unwrap();
        assert_eq!(workload, "app");
        assert_eq!(stripped.request_id, "r1");
        let Some(FromAnkaiosEnum::Response(r)) = response_message(&stripped).from_ankaios_enum else { panic!() };
        assert_eq!(r.request_id, "r1");
        let plain = Response { request_id: "ank-1".into(), content: ResponseContent::EventsCancelAccepted };
        assert!(route_response(&plain).is_none());
    }

    fn request_frame(id: &str, content: pb::request::RequestContent) -> Vec<u8> {
        let request = pb::Request { request_id: id.into(), request_content: Some(content) };
        ci::ToAnkaios { to_ankaios_enum: Some(ToAnkaiosEnum::Request(request)) }.encode_to_vec()
    }

    #[test]
    fn open_streams_are_cancelled_when_the_workload_goes() {
        let rules = vec![
            AccessRule::StateRule { operation: ReadWrite::Read, filter_masks: vec!["*".into()] },
            AccessRule::LogRule { workload_names: vec!["*".into()] },
        ];
        let mut s =
            Session::new("app", Authorizer::new(ControlInterfaceAccess { allow_rules: rules, deny_rules: vec![] }));
        s.on_frame(&hello("1.0.0"));
        let subscribe = |id: &str| {
            request_frame(
                id,
                pb::request::RequestContent::CompleteStateRequest(pb::CompleteStateRequest {
                    field_mask: vec!["workloadStates".into()],
                    subscribe_for_events: true,
                }),
            )
        };
        let logs = pb::request::RequestContent::LogsRequest(pb::LogsRequest {
            workload_names: vec![pb::WorkloadInstanceName {
                workload_name: "w".into(),
                agent_name: "a".into(),
                id: "1".into(),
            }],
            ..Default::default()
        });
        for frame in [subscribe("e1"), subscribe("e2"), subscribe("e3"), request_frame("l1", logs)] {
            assert!(matches!(s.on_frame(&frame).as_slice(), [Action::Forward(_)]));
        }
        // e1 cancelled by the workload, e2 refused by the server: neither is open any more.
        s.on_frame(&request_frame("e1", pb::request::RequestContent::EventsCancelRequest(pb::EventsCancelRequest {})));
        s.on_response(&Response { request_id: "e2".into(), content: ResponseContent::Error("no".into()) });
        s.on_response(&Response { request_id: "e3".into(), content: ResponseContent::LogEntries(vec![]) });
        let cancels: Vec<_> = s
            .cancel_streams()
            .into_iter()
            .map(|a| match a {
                Action::Forward(r) => (r.request_id, r.content),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            cancels,
            vec![("app@e3".into(), RequestContent::EventsCancel), ("app@l1".into(), RequestContent::LogsCancel)]
        );
        assert!(s.cancel_streams().is_empty());
    }
}
