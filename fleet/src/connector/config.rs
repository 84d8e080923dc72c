//! `ank-fleet-connector`'s command line; every flag also reads an
//! environment variable, so a manifest can set them either way.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::selector::parse_label;

/// The fleet connector: applies what the fleet publishes for this vehicle
/// on an MQTT 5 broker, through the control interface, and reports back.
#[derive(Debug, Clone, Parser)]
#[command(name = "ank-fleet-connector", version)]
pub struct ConnectorArgs {
    /// This vehicle's id: its topics `<prefix>/<id>/...` and its MQTT client id
    #[arg(long, env = "FLEET_VEHICLE")]
    pub vehicle: String,
    /// The broker: mqtts://HOST[:PORT] (TLS, port 8883) or mqtt://HOST[:PORT] (1883)
    #[arg(long, env = "FLEET_BROKER")]
    pub broker: String,
    /// CA certificate (PEM) the broker's certificate is checked against
    #[arg(long, env = "FLEET_CA")]
    pub ca: Option<PathBuf>,
    /// This vehicle's client certificate (PEM); its CN is the vehicle's broker user
    #[arg(long, env = "FLEET_CERT")]
    pub cert: Option<PathBuf>,
    /// The key of the client certificate (PEM)
    #[arg(long, env = "FLEET_KEY")]
    pub key: Option<PathBuf>,
    /// Accept a plain mqtt:// broker (no TLS; tests only)
    #[arg(long, env = "FLEET_ALLOW_PLAINTEXT")]
    pub allow_plaintext: bool,
    /// The operator's Ed25519 public key (PEM, from `ank-fleet keygen`): only
    /// desired messages it verifies are applied
    #[arg(long, env = "FLEET_OPERATOR_KEY", required_unless_present = "allow_unsigned")]
    pub operator_key: Option<PathBuf>,
    /// Apply unsigned desired messages (whoever can publish to this
    /// vehicle's desired topic then controls the vehicle)
    #[arg(long, env = "FLEET_ALLOW_UNSIGNED", conflicts_with = "operator_key")]
    pub allow_unsigned: bool,
    /// A label the vehicle announces, key=value (repeatable; env: comma-separated)
    #[arg(long = "label", env = "FLEET_LABELS", value_delimiter = ',', value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// The agent of manifest workloads that name none
    #[arg(long, env = "FLEET_DEFAULT_AGENT")]
    pub default_agent: Option<String>,
    /// The first level of every topic
    #[arg(long, env = "FLEET_TOPIC_PREFIX", default_value = crate::topics::DEFAULT_PREFIX)]
    pub topic_prefix: String,
    /// How long the broker keeps this vehicle's session (and queued messages) while it is offline
    #[arg(long, env = "FLEET_SESSION_EXPIRY", default_value = "1d", value_parser = ank_common::duration::parse_duration)]
    pub session_expiry: Duration,
    /// The shortest time between two status publications (changes in between are coalesced)
    #[arg(long, env = "FLEET_MIN_INTERVAL", default_value = "1s", value_parser = ank_common::duration::parse_duration)]
    pub min_interval: Duration,
    /// The longest time without a status publication, to show the vehicle alive
    #[arg(long, env = "FLEET_HEARTBEAT", default_value = "5m", value_parser = ank_common::duration::parse_duration)]
    pub heartbeat: Duration,
    /// The folder of the control-interface pipes
    #[arg(long, env = "FLEET_CONTROL_INTERFACE", default_value = "/run/ankaios/control_interface")]
    pub control_interface: PathBuf,
    /// The connector's own workload name, which the fleet may not change
    #[arg(long, env = "FLEET_WORKLOAD_NAME", default_value = "fleet-connector")]
    pub workload_name: String,
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides it
    #[arg(long, env = "FLEET_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_flags_have_defaults_and_labels_repeat() {
        let a = ConnectorArgs::try_parse_from([
            "ank-fleet-connector",
            "--vehicle",
            "v01",
            "--broker",
            "mqtt://b",
            "--allow-unsigned",
            "--label",
            "model=x",
            "--label",
            "eu=1",
        ])
        .unwrap();
        assert_eq!(a.labels, [("model".into(), "x".into()), ("eu".into(), "1".into())]);
        assert_eq!(a.session_expiry, Duration::from_secs(86400));
        assert_eq!(a.min_interval, Duration::from_secs(1));
        assert_eq!(a.control_interface, PathBuf::from("/run/ankaios/control_interface"));
        let bad = ConnectorArgs::try_parse_from(["x", "--vehicle", "v", "--broker", "b", "--label", "oops"]);
        assert!(bad.unwrap_err().to_string().contains("invalid label 'oops'"));
    }

    #[test]
    fn signing_is_required_unless_explicitly_opted_out() {
        let base = ["x", "--vehicle", "v", "--broker", "mqtts://b"];
        let missing = ConnectorArgs::try_parse_from(base).unwrap_err().to_string();
        assert!(missing.contains("--operator-key"), "{missing}");
        let both = ConnectorArgs::try_parse_from(base.into_iter().chain(["--operator-key=k", "--allow-unsigned"]));
        assert!(both.is_err(), "a key and --allow-unsigned contradict each other");
        let signed = ConnectorArgs::try_parse_from(base.into_iter().chain(["--operator-key=k"])).unwrap();
        assert_eq!(signed.operator_key, Some(PathBuf::from("k")));
        assert!(!signed.allow_plaintext && !signed.allow_unsigned);
    }

    #[test]
    fn the_documented_connector_manifest_is_valid_and_its_arguments_parse() {
        let text = include_str!("../../../examples/fleet/connector.yaml");
        let (state, _) = ank_common::manifest::parse_manifest_checked(
            "connector.yaml",
            text,
            ank_common::manifest::UnknownFields::Reject,
        )
        .unwrap();
        let connector = state.workloads.values().next().unwrap();
        let config: serde_json::Value = serde_saphyr::from_str(&connector.runtime_config).unwrap();
        let args = config["commandArgs"].as_array().unwrap().iter().map(|a| a.as_str().unwrap());
        let parsed = ConnectorArgs::try_parse_from(std::iter::once("ank-fleet-connector").chain(args)).unwrap();
        assert_eq!((parsed.vehicle.as_str(), parsed.default_agent.as_deref()), ("v01", Some("v01")));
        assert_eq!(connector.agent, "v01");
        // The file names are those ank-certs and ank-fleet keygen write.
        assert_eq!(parsed.cert, Some(PathBuf::from("/certs/agent-v01.pem")));
        assert_eq!(parsed.key, Some(PathBuf::from("/certs/agent-v01-key.pem")));
        let key = PathBuf::from("/certs").join(crate::signing::PUBLIC_KEY_FILE);
        assert_eq!(parsed.operator_key, Some(key));
        assert!(parsed.broker.starts_with("mqtts://") && !parsed.allow_plaintext && !parsed.allow_unsigned);
    }
}
