//! The topic tree under a prefix (default `fleet`): one branch per vehicle,
//! one per rollout. The broker's ACL is written against these names
//! (docs/fleet.md), so they are fixed here once.

/// The prefix topics start with unless configured otherwise.
pub const DEFAULT_PREFIX: &str = "fleet";

/// What a message on a vehicle's branch is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VehicleTopic {
    /// fleet -> vehicle: the manifest to run, with its rollout id (retained).
    Desired,
    /// vehicle -> fleet: what runs and how it is (retained).
    Status,
    /// vehicle -> fleet: workload events with counts.
    Events,
    /// vehicle -> fleet: the vehicle's labels (retained).
    Info,
    /// vehicle -> fleet: online or not; the Last Will sets it offline (retained).
    Online,
}

impl VehicleTopic {
    const ALL: [VehicleTopic; 5] =
        [VehicleTopic::Desired, VehicleTopic::Status, VehicleTopic::Events, VehicleTopic::Info, VehicleTopic::Online];

    fn leaf(self) -> &'static str {
        match self {
            VehicleTopic::Desired => "desired",
            VehicleTopic::Status => "status",
            VehicleTopic::Events => "events",
            VehicleTopic::Info => "info",
            VehicleTopic::Online => "online",
        }
    }
}

/// The names of topics under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    prefix: String,
}

impl Default for Topics {
    fn default() -> Self {
        Self::new(DEFAULT_PREFIX)
    }
}

/// The branch name under the prefix that holds rollouts, never a vehicle id.
const ROLLOUTS: &str = "rollouts";

impl Topics {
    /// Topics under a checked `prefix` ([`check_prefix`]).
    pub fn parse(prefix: &str) -> Result<Self, NameError> {
        check_prefix(prefix)?;
        Ok(Self::new(prefix))
    }

    /// Topics under `prefix` (without a trailing `/`), unchecked.
    pub fn new(prefix: &str) -> Self {
        Self { prefix: prefix.trim_end_matches('/').to_owned() }
    }

    /// `<prefix>/<vehicle>/<leaf>`.
    pub fn vehicle(&self, vehicle: &str, topic: VehicleTopic) -> String {
        format!("{}/{vehicle}/{}", self.prefix, topic.leaf())
    }

    /// The filter matching one kind of topic of every vehicle.
    pub fn every_vehicle(&self, topic: VehicleTopic) -> String {
        format!("{}/+/{}", self.prefix, topic.leaf())
    }

    /// `<prefix>/rollouts/<id>`: the record of a rollout (retained).
    pub fn rollout(&self, id: &str) -> String {
        format!("{}/{ROLLOUTS}/{id}", self.prefix)
    }

    /// `<prefix>/rollouts/<id>/control`: halt or resume (retained).
    pub fn rollout_control(&self, id: &str) -> String {
        format!("{}/{ROLLOUTS}/{id}/control", self.prefix)
    }

    /// Which vehicle and kind a topic is, if it is one of a vehicle's.
    pub fn parse_vehicle(&self, topic: &str) -> Option<(String, VehicleTopic)> {
        let rest = topic.strip_prefix(&self.prefix)?.strip_prefix('/')?;
        let (vehicle, leaf) = rest.split_once('/')?;
        if vehicle == ROLLOUTS || vehicle.is_empty() {
            return None;
        }
        let kind = VehicleTopic::ALL.into_iter().find(|k| k.leaf() == leaf)?;
        Some((vehicle.to_owned(), kind))
    }
}

/// Why a name cannot stand in a topic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("invalid {kind} '{name}': {why}")]
    Invalid { kind: &'static str, name: String, why: &'static str },
}

const ID_CHARS: &str =
    "use 1 to 64 letters, digits, '-', '_' and '.' (no '/', '+', '#', '..', spaces or control characters)";

/// Checks that `id` (a vehicle or rollout id) can stand in a topic level
/// and a client id: letters, digits, `-`, `_` and `.`, 1 to 64 of them,
/// and no `..` (which would read as a parent folder where an id becomes a
/// path). `kind` names it in the error.
pub fn check_id(kind: &'static str, id: &str) -> Result<(), NameError> {
    let invalid = |why| Err(NameError::Invalid { kind, name: id.escape_debug().to_string(), why });
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return invalid(ID_CHARS);
    }
    if id.contains("..") || id == "." {
        return invalid("'.' and '..' are not ids");
    }
    Ok(())
}

/// Checks a vehicle id: an id ([`check_id`]) that is not the name of the
/// rollouts' branch, so a vehicle's topics never overlap a rollout's.
pub fn check_vehicle(id: &str) -> Result<(), NameError> {
    check_id("vehicle id", id)?;
    if id == ROLLOUTS {
        return Err(NameError::Invalid {
            kind: "vehicle id",
            name: id.to_owned(),
            why: "'rollouts' is the topic branch of the rollout records",
        });
    }
    Ok(())
}

/// Whether `id` can stand in a topic level ([`check_id`]).
pub fn is_valid_id(id: &str) -> bool {
    check_id("id", id).is_ok()
}

/// Checks a topic prefix: one or more levels of printable characters,
/// none empty, without the wildcards `+` and `#`, and not starting with
/// `$` (the broker's own topics).
pub fn check_prefix(prefix: &str) -> Result<(), NameError> {
    let invalid = |why| Err(NameError::Invalid { kind: "topic prefix", name: prefix.escape_debug().to_string(), why });
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() || prefix.split('/').any(str::is_empty) {
        return invalid("it needs one or more non-empty levels separated by '/'");
    }
    if prefix.chars().any(|c| c.is_control() || matches!(c, '+' | '#')) {
        return invalid("wildcards '+', '#' and control characters are not allowed");
    }
    if prefix.starts_with('$') {
        return invalid("topics starting with '$' are the broker's own");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_of_a_vehicle_and_their_parse_agree() {
        let t = Topics::new("fleet/");
        assert_eq!(t.vehicle("v01", VehicleTopic::Desired), "fleet/v01/desired");
        assert_eq!(t.every_vehicle(VehicleTopic::Status), "fleet/+/status");
        for kind in VehicleTopic::ALL {
            assert_eq!(t.parse_vehicle(&t.vehicle("v7", kind)), Some(("v7".to_owned(), kind)));
        }
        assert_eq!(t.parse_vehicle("fleet/rollouts/r1"), None);
        assert_eq!(t.parse_vehicle("fleet/v1/other"), None);
        assert_eq!(t.parse_vehicle("other/v1/status"), None);
        assert_eq!(t.rollout_control("r1"), "fleet/rollouts/r1/control");
    }

    #[test]
    fn ids_that_would_break_a_topic_are_invalid() {
        assert!(is_valid_id("vehicle-01.eu_2"));
        for bad in ["", "a/b", "a+", "#", "a b", "..", ".", "a..b", "a\nb", "a\u{0}", &"x".repeat(65)] {
            assert!(!is_valid_id(bad), "{bad}");
        }
        let text = check_id("rollout id", "a/b").unwrap_err().to_string();
        assert!(text.starts_with("invalid rollout id 'a/b': use 1 to 64 letters"), "{text}");
        let text = check_vehicle("rollouts").unwrap_err().to_string();
        assert!(text.contains("topic branch of the rollout records"), "{text}");
        assert!(check_vehicle("v01").is_ok());
    }

    #[test]
    fn a_prefix_is_levels_without_wildcards() {
        for good in ["fleet", "eu/fleet", "fleet/"] {
            assert!(check_prefix(good).is_ok(), "{good}");
        }
        for bad in ["", "/", "a//b", "/a", "fleet/#", "f+", "$SYS", "a\tb"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
        assert!(Topics::parse("f/+").unwrap_err().to_string().starts_with("invalid topic prefix 'f/+'"));
    }
}
