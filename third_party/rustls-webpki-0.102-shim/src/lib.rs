//! The 0.102 name of rustls-webpki's `Error`, taken from 0.103: all that
//! rumqttc 0.25 uses of the crate (see this crate's Cargo.toml).

pub use maintained::Error;
