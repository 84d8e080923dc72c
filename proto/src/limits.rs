//! The size limit of one gRPC message, the same on every endpoint (the
//! server's services, the agent's and `ank`'s clients, both directions),
//! and the error that names it.
//!
//! 4 MiB is what tonic and Eclipse Ankaios accept by default, so whatever
//! one of our daemons sends an Ankaios peer accepts, and the other way
//! round. tonic reads a message's 5-byte gRPC header first and refuses a
//! length above the limit before reading its body, so an oversized message
//! is never buffered; what is already on the way is bounded by the HTTP/2
//! flow-control window.

use std::fmt;

use tonic::{Code, Status};

/// The largest encoded protobuf message (without its 5-byte gRPC header)
/// an endpoint sends or accepts: 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A message larger than [`MAX_MESSAGE_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageTooLarge {
    /// Its encoded size in bytes.
    pub len: usize,
}

impl fmt::Display for MessageTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "message of {} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes", self.len)
    }
}

impl std::error::Error for MessageTooLarge {}

impl From<MessageTooLarge> for Status {
    fn from(e: MessageTooLarge) -> Self {
        Status::resource_exhausted(e.to_string())
    }
}

/// Checks `message` before it is sent: tonic would otherwise fail the
/// whole stream on it.
pub fn check_size(message: &impl prost::Message) -> Result<(), MessageTooLarge> {
    let len = message.encoded_len();
    if len > MAX_MESSAGE_BYTES { Err(MessageTooLarge { len }) } else { Ok(()) }
}

/// Whether `status` refuses a message above the limit: ResourceExhausted
/// (gRPC's code for it, what our server answers) or tonic's own OutOfRange
/// ("decoded message length too large", "encoded message length too
/// large").
pub fn is_too_large(status: &Status) -> bool {
    match status.code() {
        Code::ResourceExhausted => true,
        Code::OutOfRange => status.message().contains("too large"),
        _ => false,
    }
}

/// `status` as the error a peer gets for a message above the limit:
/// ResourceExhausted (gRPC's code for it) with tonic's text, which names
/// the size and the limit.
pub fn too_large_status(status: &Status) -> Status {
    Status::resource_exhausted(format!("message too large: {}", status.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_size_and_limit() {
        let small = crate::ank_base::Error { message: "x".repeat(100) };
        assert_eq!(check_size(&small), Ok(()));
        let big = crate::ank_base::Error { message: "x".repeat(MAX_MESSAGE_BYTES) };
        let e = check_size(&big).unwrap_err();
        assert_eq!(e.len, MAX_MESSAGE_BYTES + 5, "tag and length prefix");
        let status = Status::from(e);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), "message of 4194309 bytes exceeds the limit of 4194304 bytes");

        let tonic_says = Status::out_of_range(
            "Error, decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes",
        );
        assert!(is_too_large(&tonic_says));
        assert!(!is_too_large(&Status::out_of_range("other")));
        let translated = too_large_status(&tonic_says);
        assert_eq!(translated.code(), Code::ResourceExhausted);
        assert!(translated.message().contains("found 5000000 bytes, the limit is: 4194304 bytes"));
    }
}
