//! What a client's certificate entitles it to: an agent may only say hello
//! under a name its certificate allows, and clients named in the read-only
//! list may only read (what they may send is the stream gate's business,
//! `gate.rs`). Without TLS there is no identity and nothing is checked.
//!
//! Agent names follow Ankaios by default: the name must be one of the
//! certificate's SAN DNS names, where `*` stands for any name; a SAN
//! extension without DNS names admits any name, a certificate without a
//! SAN extension none, and a client that presents more than one
//! certificate is refused as ambiguous. `--strict-agent-names` asks for
//! the name itself (CN or SAN, `*` not special); `--allow-any-agent-name`
//! switches the check off.
//!
//! Roles are opt-in (`--commander-client NAME`): with them, the
//! certificates that carry a listed name (or a read-only client's name)
//! are commanders' and every other certificate is an agent's; the stream
//! gate keeps each to its own service. Off, as in Ankaios, any client
//! certificate may be either.

use ank_common::messages::ToServer;

use super::tls::PeerIdentity;

/// How an agent's name is checked against its certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentNameRule {
    /// Ankaios' rule: a SAN DNS name equal to the agent name, or `*`.
    #[default]
    San,
    /// Opt-in: the name itself must be the certificate's CN or a SAN DNS
    /// name; `*` matches only an agent named `*`, which cannot exist.
    Strict,
    /// Any name (`--allow-any-agent-name`).
    Any,
}

/// The server's identity rules.
#[derive(Debug, Clone, Default)]
pub struct IdentityPolicy {
    pub agent_names: AgentNameRule,
    /// Certificate names (CN or SAN) of clients that may only read.
    pub read_only_clients: Vec<String>,
    /// Roles (opt-in, `--commander-client`): when not empty, only
    /// certificates carrying one of these names (or a read-only client's
    /// name) may be commanders, and they may not be agents.
    pub commander_clients: Vec<String>,
}

/// What a certificate may be when roles are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertRole {
    Agent,
    Commander,
}

/// Why an agent's connection is refused, with the gRPC code to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRefusal {
    /// The certificate does not allow the name.
    Unauthenticated(String),
    /// The first message is no AgentHello.
    InvalidArgument(String),
}

impl std::fmt::Display for AgentRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentRefusal::Unauthenticated(m) | AgentRefusal::InvalidArgument(m) => f.write_str(m),
        }
    }
}

impl From<AgentRefusal> for tonic::Status {
    fn from(r: AgentRefusal) -> Self {
        match r {
            AgentRefusal::Unauthenticated(m) => tonic::Status::unauthenticated(m),
            AgentRefusal::InvalidArgument(m) => tonic::Status::invalid_argument(m),
        }
    }
}

impl IdentityPolicy {
    /// Checks an agent's first message against its certificate.
    pub fn check_agent(&self, peer: Option<&PeerIdentity>, first: Option<&ToServer>) -> Result<(), AgentRefusal> {
        let Some(peer) = peer else { return Ok(()) };
        if self.agent_names == AgentNameRule::Any {
            return Ok(());
        }
        if self.agent_names == AgentNameRule::San && peer.chain_len > 1 {
            return Err(AgentRefusal::Unauthenticated("Ambiguous agent certificates provided!".to_owned()));
        }
        let Some(ToServer::AgentHello { agent_name, .. }) = first else {
            return Err(AgentRefusal::InvalidArgument("No AgentHello received.".to_owned()));
        };
        match self.agent_names {
            AgentNameRule::San => check_san(peer, agent_name),
            AgentNameRule::Strict => check_strict(peer, agent_name),
            AgentNameRule::Any => Ok(()),
        }
    }

    /// The role of a client's certificate; `None` with roles off or
    /// without TLS.
    pub fn role_of(&self, peer: Option<&PeerIdentity>) -> Option<CertRole> {
        if self.commander_clients.is_empty() {
            return None;
        }
        let commander =
            peer?.names.iter().any(|n| self.commander_clients.contains(n) || self.read_only_clients.contains(n));
        Some(if commander { CertRole::Commander } else { CertRole::Agent })
    }

    /// Whether the client may only read.
    pub fn is_read_only(&self, peer: Option<&PeerIdentity>) -> bool {
        peer.is_some_and(|p| p.names.iter().any(|n| self.read_only_clients.contains(n)))
    }
}

fn check_san(peer: &PeerIdentity, agent_name: &str) -> Result<(), AgentRefusal> {
    let Some(sans) = &peer.san_dns else {
        return Err(AgentRefusal::Unauthenticated("No subject alt names found in agent certificates!".to_owned()));
    };
    if sans.is_empty() || sans.iter().any(|n| n == agent_name || n == "*") {
        return Ok(());
    }
    Err(AgentRefusal::Unauthenticated(format!(
        "Agent name '{agent_name}' does not match SAN {:?} in agent certificates!",
        sans.to_vec()
    )))
}

fn check_strict(peer: &PeerIdentity, agent_name: &str) -> Result<(), AgentRefusal> {
    if peer.names.iter().any(|n| n == agent_name) {
        return Ok(());
    }
    Err(AgentRefusal::Unauthenticated(format!(
        "agent name '{agent_name}' is not in the client certificate of {} (names: {})",
        peer.addr,
        if peer.names.is_empty() { "none".to_owned() } else { peer.names.join(", ") }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(names: &[&str]) -> PeerIdentity {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        PeerIdentity {
            addr: "10.0.0.7:4000".parse().unwrap(),
            names: names.clone().into(),
            san_dns: Some(names.into()),
            chain_len: 1,
        }
    }

    /// A certificate with CN `cn` and the SAN DNS names `sans` (`None`: no SAN extension).
    fn cert(cn: &str, sans: Option<&[&str]>) -> PeerIdentity {
        let san_dns: Option<Vec<String>> = sans.map(|s| s.iter().map(|n| (*n).to_owned()).collect());
        let names = ank_common::tls::CertNames { common_names: vec![cn.to_owned()], san_dns: san_dns.clone() }.all();
        PeerIdentity {
            addr: "10.0.0.7:4000".parse().unwrap(),
            names: names.into(),
            san_dns: san_dns.map(Into::into),
            chain_len: 1,
        }
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

    fn unauthenticated(m: &str) -> Result<(), AgentRefusal> {
        Err(AgentRefusal::Unauthenticated(m.to_owned()))
    }

    #[test]
    fn agent_names_follow_the_san_dns_names_with_star_for_any_by_default() {
        let policy = IdentityPolicy::default();
        let check = |p: &PeerIdentity, name: &str| policy.check_agent(Some(p), Some(&hello(name)));
        // Ankaios' own agent certificate: CN agent_A, SAN DNS `*`.
        let star = cert("agent_A", Some(&["*"]));
        assert_eq!(check(&star, "agent_A"), Ok(()));
        assert_eq!(check(&star, "agent_B"), Ok(()), "`*` admits any name");
        let named = cert("whatever", Some(&["agent_A", "a.local"]));
        assert_eq!(check(&named, "agent_A"), Ok(()));
        assert_eq!(
            check(&named, "agent_B"),
            unauthenticated(
                "Agent name 'agent_B' does not match SAN [\"agent_A\", \"a.local\"] in agent certificates!"
            )
        );
        assert_eq!(
            check(&cert("agent_A", None), "agent_A"),
            unauthenticated("No subject alt names found in agent certificates!"),
            "the CN does not count"
        );
        assert_eq!(check(&cert("agent_A", Some(&[])), "agent_B"), Ok(()), "a SAN without DNS names admits any");
        let chain = PeerIdentity { chain_len: 2, ..star.clone() };
        assert_eq!(check(&chain, "agent_A"), unauthenticated("Ambiguous agent certificates provided!"));
        assert_eq!(
            policy.check_agent(Some(&star), Some(&ToServer::Goodbye)),
            Err(AgentRefusal::InvalidArgument("No AgentHello received.".into()))
        );
        assert_eq!(policy.check_agent(None, Some(&hello("agent_B"))), Ok(()), "no TLS, no identity");
    }

    #[test]
    fn strict_agent_names_need_the_name_itself_in_cn_or_san() {
        let policy = IdentityPolicy { agent_names: AgentNameRule::Strict, ..IdentityPolicy::default() };
        let check = |p: &PeerIdentity, name: &str| policy.check_agent(Some(p), Some(&hello(name)));
        assert_eq!(check(&cert("agent_A", None), "agent_A"), Ok(()), "the CN counts");
        assert_eq!(check(&cert("x", Some(&["agent_A"])), "agent_A"), Ok(()));
        assert_eq!(
            check(&cert("agent_A", Some(&["*"])), "agent_B"),
            unauthenticated(
                "agent name 'agent_B' is not in the client certificate of 10.0.0.7:4000 (names: agent_A, *)"
            ),
            "`*` is refused"
        );
        assert_eq!(check(&peer(&["agent_A"]), "agent_A"), Ok(()));
    }

    #[test]
    fn allow_any_agent_name_switches_the_check_off() {
        let off = IdentityPolicy { agent_names: AgentNameRule::Any, ..IdentityPolicy::default() };
        assert_eq!(off.check_agent(Some(&cert("agent_A", None)), Some(&hello("agent_B"))), Ok(()));
        assert_eq!(off.check_agent(Some(&peer(&["agent_A"])), Some(&hello("agent_B"))), Ok(()));
    }

    #[test]
    fn read_only_clients_are_named_by_their_certificates() {
        let policy = IdentityPolicy { read_only_clients: vec!["viewer".into()], ..IdentityPolicy::default() };
        assert!(policy.is_read_only(Some(&peer(&["viewer"]))));
        assert!(!policy.is_read_only(Some(&peer(&["admin"]))));
        assert!(!policy.is_read_only(None));
    }
}
