//! What one stream may send, checked before anything reaches the server
//! actor. As in Ankaios, a stream starts with the hello of its service (an
//! `AgentHello` on AgentConnection, a `CommanderHello` on CliConnection and
//! CommandConnection) or is refused, and later hellos on the same stream
//! are ignored (a stream speaks for one agent, the one its first hello
//! named). A read-only client may send only what the allow-list of
//! [`is_reading`] names: a request of another kind is answered with a
//! refusal, any other message is dropped, and it cannot be an agent. With
//! roles on (`--commander-client`), an agent's certificate cannot open a
//! commander's stream and a commander's certificate cannot be an agent.

use ank_common::messages::{Request, RequestContent, Response, ResponseContent, ToServer};
use tonic::Status;

use super::identity::{CertRole, IdentityPolicy};
use super::tls::PeerIdentity;
use crate::connections::ConnKind;

/// What becomes of a message after the first.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Handed to the server.
    Forward,
    /// Not handed on; this response goes back to the client instead.
    Refuse(Response),
    /// Not handed on, nothing answered (logged).
    Ignore(&'static str),
}

/// The checks of one stream: its service, its client's certificate, and
/// what the identity rules make of it.
#[derive(Debug, Clone)]
pub struct StreamGate {
    kind: ConnKind,
    /// The client's certificate (`None`: no TLS, nothing to check).
    peer: Option<PeerIdentity>,
    /// Whether the client may only read.
    read_only: bool,
    /// What the certificate may be, with roles on.
    role: Option<CertRole>,
}

impl StreamGate {
    pub fn new(kind: ConnKind, peer: Option<PeerIdentity>, policy: &IdentityPolicy) -> Self {
        let read_only = policy.is_read_only(peer.as_ref());
        let role = policy.role_of(peer.as_ref());
        Self { kind, peer, read_only, role }
    }

    /// Checks the first message of the stream: the hello of its service
    /// (Ankaios' texts); no agent with a read-only certificate; with roles
    /// on, the service the certificate's role allows.
    pub fn first(&self, first: Option<&ToServer>) -> Result<(), Status> {
        let Some(first) = first else { return Err(Status::invalid_argument("Empty")) };
        let agent = self.kind == ConnKind::Agent;
        match (agent, first) {
            (true, ToServer::AgentHello { .. }) | (false, ToServer::CommanderHello { .. }) => {}
            (true, _) => return Err(Status::invalid_argument("No AgentHello received.")),
            (false, _) => return Err(Status::invalid_argument("No CommanderHello received.")),
        }
        let who = self.peer.as_ref().map_or("?", first_name);
        if agent && self.read_only {
            return Err(Status::permission_denied(format!(
                "the client certificate '{who}' is read-only; it cannot connect as an agent"
            )));
        }
        match (agent, self.role) {
            (true, Some(CertRole::Commander)) => Err(Status::permission_denied(format!(
                "the client certificate '{who}' is a commander's (--commander-client); it cannot connect as an agent"
            ))),
            (false, Some(CertRole::Agent)) => Err(Status::permission_denied(format!(
                "the client certificate '{who}' is an agent's: only the certificates --commander-client or \
                 --read-only-client names may connect as commanders"
            ))),
            _ => Ok(()),
        }
    }

    /// What becomes of a message after the first.
    pub fn next(&self, msg: &ToServer) -> Verdict {
        match msg {
            ToServer::AgentHello { .. } => return Verdict::Ignore("a later AgentHello on the same stream"),
            ToServer::CommanderHello { .. } => return Verdict::Ignore("a later CommanderHello on the same stream"),
            _ => {}
        }
        if !self.read_only {
            return Verdict::Forward;
        }
        let who = self.peer.as_ref().map_or("?", first_name);
        match msg {
            ToServer::Goodbye => Verdict::Forward,
            ToServer::Request(Request { content, .. }) if is_reading(content) => Verdict::Forward,
            ToServer::Request(Request { request_id, .. }) => Verdict::Refuse(Response {
                request_id: request_id.clone(),
                content: ResponseContent::Error(format!(
                    "access denied: the client certificate '{who}' is read-only; the state cannot be changed with it"
                )),
            }),
            _ => Verdict::Ignore("a message of a read-only client that is no reading request"),
        }
    }
}

/// The allow-list of what a read-only client may ask: reading the state,
/// the rendered state and logs, and ending its own log streams and event
/// subscriptions. A request kind added later is refused until it is
/// listed here.
pub fn is_reading(content: &RequestContent) -> bool {
    matches!(
        content,
        RequestContent::CompleteState { .. }
            | RequestContent::RenderedState { .. }
            | RequestContent::Logs(_)
            | RequestContent::LogsCancel
            | RequestContent::EventsCancel
    )
}

fn first_name(peer: &PeerIdentity) -> &str {
    peer.names.first().map_or("?", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::messages::LogsRequest;

    fn viewer_policy() -> IdentityPolicy {
        IdentityPolicy { read_only_clients: vec!["viewer".into()], ..IdentityPolicy::default() }
    }

    fn gate(kind: ConnKind, name: Option<&str>, policy: &IdentityPolicy) -> StreamGate {
        StreamGate::new(kind, name.map(peer), policy)
    }

    fn peer(name: &str) -> PeerIdentity {
        PeerIdentity {
            addr: "10.0.0.7:4000".parse().unwrap(),
            names: vec![name.to_owned()].into(),
            san_dns: None,
            chain_len: 1,
        }
    }

    fn agent_hello(name: &str) -> ToServer {
        ToServer::AgentHello {
            agent_name: name.into(),
            protocol_version: ank_common::PROTOCOL_VERSION.into(),
            tags: Default::default(),
            reports_conditions: true,
            capabilities: Vec::new(),
            quota: Default::default(),
        }
    }

    fn commander_hello() -> ToServer {
        ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.into() }
    }

    fn request(content: RequestContent) -> ToServer {
        ToServer::Request(Request { request_id: "r".into(), content })
    }

    /// One request of every kind, with whether a read-only client may make it.
    fn every_request() -> Vec<(RequestContent, bool)> {
        vec![
            (RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: true }, true),
            (RequestContent::UpdateState { new_state: Box::default(), update_mask: vec![] }, false),
            (RequestContent::Logs(LogsRequest::default()), true),
            (RequestContent::LogsCancel, true),
            (RequestContent::EventsCancel, true),
            (RequestContent::JobRerun { failed_only: false }, false),
            (RequestContent::JobInterrupt { job_id: 1 }, false),
            (RequestContent::RenderedState { field_mask: vec![] }, true),
        ]
    }

    #[test]
    fn a_stream_must_start_with_the_hello_of_its_service() {
        let agent = gate(ConnKind::Agent, None, &IdentityPolicy::default());
        assert!(agent.first(Some(&agent_hello("A"))).is_ok());
        for kind in [ConnKind::Commander, ConnKind::Command] {
            let commander = gate(kind, None, &IdentityPolicy::default());
            assert!(commander.first(Some(&commander_hello())).is_ok());
            let e = commander.first(Some(&request(RequestContent::LogsCancel))).unwrap_err();
            assert_eq!((e.code(), e.message()), (tonic::Code::InvalidArgument, "No CommanderHello received."));
            let e = commander.first(Some(&agent_hello("A"))).unwrap_err();
            assert_eq!(e.message(), "No CommanderHello received.");
            assert_eq!(commander.first(None).unwrap_err().message(), "Empty");
        }
        let e = agent.first(Some(&commander_hello())).unwrap_err();
        assert_eq!((e.code(), e.message()), (tonic::Code::InvalidArgument, "No AgentHello received."));
        let update = request(RequestContent::UpdateState { new_state: Box::default(), update_mask: vec![] });
        assert_eq!(agent.first(Some(&update)).unwrap_err().message(), "No AgentHello received.");
    }

    #[test]
    fn later_hellos_are_ignored() {
        for kind in [ConnKind::Agent, ConnKind::Commander, ConnKind::Command] {
            let gate = gate(kind, None, &IdentityPolicy::default());
            assert!(matches!(gate.next(&agent_hello("B")), Verdict::Ignore(_)));
            assert!(matches!(gate.next(&commander_hello()), Verdict::Ignore(_)));
        }
    }

    #[test]
    fn a_read_only_client_may_make_only_reading_requests() {
        let gate = gate(ConnKind::Commander, Some("viewer"), &viewer_policy());
        assert!(gate.first(Some(&commander_hello())).is_ok());
        for (content, reading) in every_request() {
            let verdict = gate.next(&request(content.clone()));
            if reading {
                assert_eq!(verdict, Verdict::Forward, "{content:?}");
            } else {
                let Verdict::Refuse(r) = verdict else { panic!("{content:?} not refused: {verdict:?}") };
                assert_eq!(r.request_id, "r");
                assert!(matches!(r.content, ResponseContent::Error(e) if e.contains("'viewer' is read-only")));
            }
        }
        assert_eq!(gate.next(&ToServer::Goodbye), Verdict::Forward);
        let states = ToServer::UpdateWorkloadState(vec![]);
        assert!(matches!(gate.next(&states), Verdict::Ignore(_)));
        let entries = ToServer::LogEntriesResponse { request_id: "1@r".into(), entries: vec![] };
        assert!(matches!(gate.next(&entries), Verdict::Ignore(_)));
        // A writing client's requests all pass.
        let admin = self::gate(ConnKind::Commander, Some("admin"), &viewer_policy());
        for (content, _) in every_request() {
            assert_eq!(admin.next(&request(content)), Verdict::Forward);
        }
    }

    #[test]
    fn a_read_only_certificate_cannot_be_an_agent() {
        let gate = gate(ConnKind::Agent, Some("viewer"), &viewer_policy());
        let e = gate.first(Some(&agent_hello("A"))).unwrap_err();
        assert_eq!(e.code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn with_roles_on_agents_are_only_agents_and_commanders_only_commanders() {
        let roles = IdentityPolicy {
            commander_clients: vec!["admin".into()],
            read_only_clients: vec!["viewer".into()],
            ..IdentityPolicy::default()
        };
        let (agent, commander) = (agent_hello("agent_A"), commander_hello());
        for kind in [ConnKind::Commander, ConnKind::Command] {
            assert!(gate(kind, Some("admin"), &roles).first(Some(&commander)).is_ok());
            assert!(gate(kind, Some("viewer"), &roles).first(Some(&commander)).is_ok(), "a read-only commander");
            let e = gate(kind, Some("agent_A"), &roles).first(Some(&commander)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied);
            assert!(e.message().contains("'agent_A' is an agent's"), "{}", e.message());
        }
        assert!(gate(ConnKind::Agent, Some("agent_A"), &roles).first(Some(&agent)).is_ok());
        let e = gate(ConnKind::Agent, Some("admin"), &roles).first(Some(&agent)).unwrap_err();
        assert!(e.message().contains("'admin' is a commander's"), "{}", e.message());
        // Off (the default, as Ankaios): any certificate may be either.
        let off = IdentityPolicy::default();
        assert!(gate(ConnKind::Command, Some("agent_A"), &off).first(Some(&commander)).is_ok());
        assert!(gate(ConnKind::Agent, Some("admin"), &off).first(Some(&agent)).is_ok());
        // Without TLS there is no certificate and no role.
        assert!(gate(ConnKind::Command, None, &roles).first(Some(&commander)).is_ok());
    }
}
