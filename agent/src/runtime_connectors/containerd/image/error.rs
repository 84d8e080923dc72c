//! The errors of [`super::Images`]: each names the image (and where it
//! helps, the blob or snapshot) it is about.

use tonic::Code;

/// Why an image could not be resolved, unpacked or pulled.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The reference is not a valid image reference.
    #[error("invalid image reference '{reference}': {reason}")]
    InvalidReference { reference: String, reason: String },

    /// Not a containerd namespace name.
    #[error("'{0}' is not a valid containerd namespace")]
    InvalidNamespace(String),

    /// Neither in containerd's namespace nor pullable from its registry.
    #[error("image '{image}' is not in containerd's namespace '{namespace}' and could not be pulled: {reason}")]
    NotFound { image: String, namespace: String, reason: String },

    /// A call to containerd failed.
    #[error("image '{image}': containerd {operation} failed: {code:?}: {message}")]
    Containerd { image: String, operation: &'static str, code: Code, message: String },

    /// A manifest, index or config blob could not be understood.
    #[error("image '{image}': {what} {digest} is not valid: {reason}")]
    BadContent { image: String, what: &'static str, digest: String, reason: String },

    /// An index has no manifest for this machine's platform.
    #[error("image '{image}': no manifest for platform {platform} in index {digest}")]
    NoMatchingPlatform { image: String, platform: String, digest: String },

    /// Applying a layer gave another diff id than the config's.
    #[error("image '{image}': layer {layer} unpacked to diff id {actual}, the image config says {expected}")]
    DiffIdMismatch { image: String, layer: String, expected: String, actual: String },

    /// The registry failed while the image was pulled (after it was found).
    #[error("image '{image}': pulling from its registry failed: {reason}")]
    Registry { image: String, reason: String },
}

impl ImageError {
    /// A failed containerd call on behalf of `image`.
    pub(super) fn containerd(image: &str, operation: &'static str, status: tonic::Status) -> Self {
        ImageError::Containerd {
            image: image.to_string(),
            operation,
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// A blob of `image` that is not what it should be.
    pub(super) fn bad(image: &str, what: &'static str, digest: &str, reason: impl std::fmt::Display) -> Self {
        ImageError::BadContent {
            image: image.to_string(),
            what,
            digest: digest.to_string(),
            reason: reason.to_string(),
        }
    }
}
