//! `ank-fleet-connector`: the workload on each vehicle that connects the
//! vehicle's orchestrator to the fleet's MQTT 5 broker. [`config`] reads
//! the flags, [`control`] talks to the agent over the control-interface
//! FIFOs, [`apply`] turns a desired message into one update (idempotent by
//! rollout id), [`status`] computes what is reported, [`pacer`] decides
//! when, and [`core`] ties them together. [`run`] wires the real edges;
//! [`fake_broker`] stands in for the broker in tests.

pub mod apply;
pub mod config;
pub mod control;
pub mod core;
#[cfg(test)]
mod core_tests;
pub mod fake_broker;
pub mod pacer;
pub mod status;

use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use rumqttc::v5::AsyncClient;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{LastWill, Publish};

use self::apply::ApplyContext;
use self::config::ConnectorArgs;
use self::control::FifoControl;
use self::core::{Broker, Connector, Settings};
use crate::mqtt::{BrokerUrl, TlsFiles, options};
use crate::payload::{Online, PAYLOAD_VERSION, encode};
use crate::signing::VerifyingKey;
use crate::topics::{Topics, VehicleTopic, check_vehicle};

#[async_trait]
impl Broker for AsyncClient {
    async fn publish(&self, topic: &str, payload: Vec<u8>, retain: bool) -> Result<(), String> {
        AsyncClient::publish(self, topic, QoS::AtLeastOnce, retain, payload).await.map_err(|e| e.to_string())
    }

    async fn subscribe(&self, filter: &str) -> Result<(), String> {
        AsyncClient::subscribe(self, filter, QoS::AtLeastOnce).await.map_err(|e| e.to_string())
    }

    async fn ack(&self, publish: &Publish) {
        if let Err(e) = AsyncClient::ack(self, publish).await {
            tracing::warn!("cannot acknowledge a message: {e}");
        }
    }
}

/// Runs the connector until SIGTERM or Ctrl-C.
pub async fn run(args: ConnectorArgs) -> anyhow::Result<()> {
    check_vehicle(&args.vehicle).context("--vehicle")?;
    let topics = Topics::parse(&args.topic_prefix).context("--topic-prefix")?;
    let url = BrokerUrl::parse(&args.broker)?;
    let files = TlsFiles { ca: args.ca.clone(), cert: args.cert.clone(), key: args.key.clone() };
    let operator_key = match &args.operator_key {
        Some(path) => Some(VerifyingKey::from_pem_file(path).context("--operator-key")?),
        None => {
            tracing::warn!(
                "--allow-unsigned: desired messages are not verified; whoever can publish to '{}' controls this \
                 vehicle within the connector's controlInterfaceAccess rules",
                topics.vehicle(&args.vehicle, VehicleTopic::Desired)
            );
            None
        }
    };
    let mut opts = options(&args.vehicle, &url, &files, args.allow_plaintext)?;
    opts.set_clean_start(false);
    opts.set_session_expiry_interval(Some(u32::try_from(args.session_expiry.as_secs()).unwrap_or(u32::MAX)));
    opts.set_manual_acks(true);
    let offline = encode(&Online { version: PAYLOAD_VERSION, online: false });
    opts.set_last_will(LastWill::new(
        topics.vehicle(&args.vehicle, VehicleTopic::Online),
        offline,
        QoS::AtLeastOnce,
        true,
        None,
    ));
    let (client, eventloop) = AsyncClient::new(opts, 64);
    let link = crate::link::spawn_pump(eventloop);
    let settings = Settings {
        vehicle: args.vehicle.clone(),
        topics,
        labels: args.labels.iter().cloned().collect(),
        apply: ApplyContext { default_agent: args.default_agent.clone(), own_workload: args.workload_name.clone() },
        min_interval: args.min_interval,
        heartbeat: args.heartbeat,
        operator_key,
    };
    tracing::info!("fleet connector for vehicle '{}' on {}", args.vehicle, args.broker);
    let connector = Connector::new(settings, FifoControl::new(args.control_interface.clone()), client.clone());
    connector.run(link, shutdown_signal()).await;
    // Give the offline message and the DISCONNECT a moment to leave.
    let _ = tokio::time::timeout(Duration::from_secs(2), client.disconnect()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(())
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")
    {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("{e:#}");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
