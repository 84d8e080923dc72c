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
    /// Topics under `prefix` (without a trailing `/`).
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

/// Whether `id` can stand in a topic level and a client id: letters,
/// digits, `-`, `_` and `.`, 1 to 64 of them (no `/`, `+`, `#`).
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
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
        for bad in ["", "a/b", "a+", "#", "a b", &"x".repeat(65)] {
            assert!(!is_valid_id(bad), "{bad}");
        }
    }
}
