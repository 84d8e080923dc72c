//! A [`Broker`] for tests that keeps what the connector published and
//! counts its acknowledgements, so the connector's core runs without MQTT
//! (the unit tests and the fleet's adversarial suite share it).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::core::Broker;
use crate::link::Publish;

/// Topic and payload of each publication, in order.
pub type Publications = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// What the connector published and acknowledged.
#[derive(Clone, Default)]
pub struct FakeBroker {
    pub published: Publications,
    pub acks: Arc<Mutex<usize>>,
}

#[async_trait]
impl Broker for FakeBroker {
    async fn publish(&self, topic: &str, payload: Vec<u8>, _retain: bool) -> Result<(), String> {
        self.published.lock().unwrap().push((topic.to_owned(), payload));
        Ok(())
    }
    async fn subscribe(&self, _filter: &str) -> Result<(), String> {
        Ok(())
    }
    async fn ack(&self, _publish: &Publish) {
        *self.acks.lock().unwrap() += 1;
    }
}
