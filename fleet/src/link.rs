//! The broker link's event pump: polls rumqttc's event loop in its own
//! task (so MQTT keep-alives and acks go on while the caller waits for
//! something else) and hands connects, disconnects and messages over a
//! channel. After an error it waits before the next attempt, doubling the
//! wait up to 30 s with jitter, so a fleet does not reconnect in lockstep
//! after a broker restart.

use std::time::Duration;

/// A received MQTT publication (what [`LinkEvent::Message`] carries, to
/// acknowledge it).
pub use rumqttc::v5::mqttbytes::v5::Publish;
use rumqttc::v5::mqttbytes::v5::{Packet, PubAckReason};
use rumqttc::v5::{Event, EventLoop};
use tokio::sync::mpsc;

/// What happened on the broker link.
#[derive(Debug)]
pub enum LinkEvent {
    /// Connected (again); `session_present` when the broker kept the session.
    Connected { session_present: bool },
    /// The connection failed or dropped; the pump retries by itself.
    Disconnected(String),
    /// A message on a subscribed topic; acknowledge it with its `publish`
    /// once handled (manual acks) or ignore that field.
    Message { topic: String, payload: Vec<u8>, publish: Box<Publish> },
    /// The broker accepted or refused a publication (MQTT 5 reason code).
    Refused { pkid: u16, reason: String },
}

/// The longest wait between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Polls `eventloop` until the receiver is dropped.
pub fn spawn_pump(mut eventloop: EventLoop) -> mpsc::Receiver<LinkEvent> {
    let (tx, rx) = mpsc::channel(256);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(500);
        loop {
            let event = match eventloop.poll().await {
                Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                    backoff = Duration::from_millis(500);
                    LinkEvent::Connected { session_present: ack.session_present }
                }
                Ok(Event::Incoming(Packet::Publish(p))) => LinkEvent::Message {
                    topic: String::from_utf8_lossy(&p.topic).into_owned(),
                    payload: p.payload.to_vec(),
                    publish: Box::new(p),
                },
                Ok(Event::Incoming(Packet::PubAck(ack)))
                    if !matches!(ack.reason, PubAckReason::Success | PubAckReason::NoMatchingSubscribers) =>
                {
                    LinkEvent::Refused { pkid: ack.pkid, reason: format!("{:?}", ack.reason) }
                }
                Ok(other) => {
                    tracing::trace!("broker link: {other:?}");
                    continue;
                }
                Err(e) => {
                    if tx.send(LinkEvent::Disconnected(e.to_string())).await.is_err() {
                        return;
                    }
                    let jitter = Duration::from_millis(fastrand::u64(0..=backoff.as_millis() as u64 / 2));
                    tokio::time::sleep(backoff + jitter).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    rx
}
