//! What a client's certificate entitles it to: an agent may only say hello
//! under a name its certificate carries (CN or SAN; can be switched off),
//! and clients named in the read-only list may not change the state.
//! Without TLS there is no identity and nothing is checked.

use ank_common::messages::{Request, RequestContent, Response, ResponseContent, ToServer};

use super::tls::PeerIdentity;

/// The server's identity rules.
#[derive(Debug, Clone)]
pub struct IdentityPolicy {
    /// Agents must connect under a name in their certificate.
    pub check_agent_names: bool,
    /// Certificate names (CN or SAN) of clients that may only read.
    pub read_only_clients: Vec<String>,
}

impl Default for IdentityPolicy {
    fn default() -> Self {
        Self { check_agent_names: true, read_only_clients: Vec::new() }
    }
}

impl IdentityPolicy {
    /// Checks an agent's first message against its certificate.
    pub fn check_agent(&self, peer: Option<&PeerIdentity>, first: &ToServer) -> Result<(), String> {
        let (Some(peer), true) = (peer, self.check_agent_names) else { return Ok(()) };
        match first {
            ToServer::AgentHello { agent_name, .. } if peer.names.iter().any(|n| n == agent_name) => Ok(()),
            ToServer::AgentHello { agent_name, .. } => Err(format!(
                "agent name '{agent_name}' is not in the client certificate of {} (names: {})",
                peer.addr,
                if peer.names.is_empty() { "none".to_owned() } else { peer.names.join(", ") }
            )),
            _ => Err("the first message of an agent must be its AgentHello".to_owned()),
        }
    }

    /// Whether the client may only read.
    pub fn is_read_only(&self, peer: Option<&PeerIdentity>) -> bool {
        peer.is_some_and(|p| p.names.iter().any(|n| self.read_only_clients.contains(n)))
    }
}

/// For a read-only client: the refusal of a request that would change the
/// state, `None` for requests it may make.
pub fn refuse_write(peer: &PeerIdentity, message: &ToServer) -> Option<Response> {
    let ToServer::Request(Request { request_id, content: RequestContent::UpdateState { .. } }) = message else {
        return None;
    };
    let who = peer.names.first().map(String::as_str).unwrap_or("?");
    Some(Response {
        request_id: request_id.clone(),
        content: ResponseContent::Error(format!(
            "access denied: the client certificate '{who}' is read-only; the state cannot be changed with it"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(names: &[&str]) -> PeerIdentity {
        PeerIdentity { addr: "10.0.0.7:4000".parse().unwrap(), names: names.iter().map(|n| (*n).to_owned()).collect() }
    }

    fn hello(name: &str) -> ToServer {
        ToServer::AgentHello {
            agent_name: name.into(),
            protocol_version: "1.0.0".into(),
            tags: Default::default(),
            reports_conditions: true,
            capabilities: Vec::new(),
            quota: Default::default(),
        }
    }

    #[test]
    fn agents_connect_only_under_a_name_of_their_certificate() {
        let policy = IdentityPolicy::default();
        assert_eq!(policy.check_agent(Some(&peer(&["agent_A", "a.local"])), &hello("agent_A")), Ok(()));
        assert_eq!(
            policy.check_agent(Some(&peer(&["agent_A"])), &hello("agent_B")),
            Err("agent name 'agent_B' is not in the client certificate of 10.0.0.7:4000 (names: agent_A)".into())
        );
        assert_eq!(policy.check_agent(None, &hello("agent_B")), Ok(()), "no TLS, no identity");
        let off = IdentityPolicy { check_agent_names: false, ..IdentityPolicy::default() };
        assert_eq!(off.check_agent(Some(&peer(&["agent_A"])), &hello("agent_B")), Ok(()));
    }

    #[test]
    fn read_only_clients_cannot_update_the_state() {
        let policy = IdentityPolicy { read_only_clients: vec!["viewer".into()], ..IdentityPolicy::default() };
        let viewer = peer(&["viewer"]);
        assert!(policy.is_read_only(Some(&viewer)));
        assert!(!policy.is_read_only(Some(&peer(&["admin"]))));
        assert!(!policy.is_read_only(None));
        let update = ToServer::Request(Request {
            request_id: "r1".into(),
            content: RequestContent::UpdateState { new_state: Box::default(), update_mask: vec![] },
        });
        let refusal = refuse_write(&viewer, &update).unwrap();
        assert_eq!(refusal.request_id, "r1");
        assert!(matches!(refusal.content, ResponseContent::Error(e) if e.contains("'viewer' is read-only")));
        let read = ToServer::Request(Request {
            request_id: "r2".into(),
            content: RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false },
        });
        assert!(refuse_write(&viewer, &read).is_none());
    }
}
