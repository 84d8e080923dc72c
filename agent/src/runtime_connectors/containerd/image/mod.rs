//! Images for containerd containers, over containerd's own gRPC API.
//!
//! [`Images::resolve`] turns an image reference into the [`ImageConfig`] a
//! container is built from and makes sure the image's layers are unpacked
//! as snapshots of the snapshotter (the chain id is the snapshot a
//! container's root file system is prepared from). An image that is not in
//! the namespace is pulled from its registry first (over https; plain http
//! only for registries on this machine: `localhost`, `127.0.0.1`, `[::1]`).
//!
//! Parts: [`reference`] (normalising references as docker does),
//! [`manifest`] (manifest, index and config JSON, chain ids), `content`
//! (reading and writing blobs), `unpack` (snapshots and layer diffs) and
//! `pull` (registries). The work of one resolve is done under a containerd
//! lease, so that containerd's garbage collector keeps half-done blobs and
//! snapshots; the lease is deleted at its end (and expires by itself).

mod content;
mod error;
pub mod manifest;
mod pull;
pub mod reference;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pull;
#[cfg(test)]
mod tests_rich;
mod unpack;

use std::sync::atomic::{AtomicU64, Ordering};

use containerd_client::services::v1::GetImageRequest;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::types::Descriptor as ApiDescriptor;
use tokio::sync::OnceCell;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request};

pub use error::ImageError;
use manifest::{ConfigBlob, ManifestOrIndex};
pub use reference::ImageRef;

use super::image_config::ImageConfig;

/// The snapshotter containerd and nerdctl use by default.
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";

/// The gRPC metadata key of containerd's namespace.
const NAMESPACE_HEADER: &str = "containerd-namespace";
/// The gRPC metadata key of a containerd lease.
const LEASE_HEADER: &str = "containerd-lease";

/// The largest manifest, index or config blob read into memory.
const MAX_JSON_BLOB: usize = 16 << 20;

/// Images of one containerd namespace and snapshotter.
#[derive(Debug, Clone)]
pub struct Images {
    channel: Channel,
    namespace: String,
    snapshotter: String,
}

impl Images {
    /// Images of `namespace` over `channel` (from
    /// `containerd_client::connect`), unpacked for [`DEFAULT_SNAPSHOTTER`].
    pub fn new(channel: Channel, namespace: &str) -> Result<Self, ImageError> {
        let valid = !namespace.is_empty()
            && namespace.len() <= 76
            && namespace.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && namespace.starts_with(|c: char| c.is_ascii_alphanumeric());
        if !valid {
            return Err(ImageError::InvalidNamespace(namespace.to_string()));
        }
        Ok(Images { channel, namespace: namespace.to_string(), snapshotter: DEFAULT_SNAPSHOTTER.to_string() })
    }

    /// The same, unpacking for `snapshotter` instead.
    pub fn with_snapshotter(mut self, snapshotter: &str) -> Self {
        self.snapshotter = snapshotter.to_string();
        self
    }

    /// The containerd namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The snapshotter images are unpacked for.
    pub fn snapshotter(&self) -> &str {
        &self.snapshotter
    }

    /// The config of the image `reference` (normalised as docker does),
    /// unpacked for the snapshotter; pulled first when it is not in the
    /// namespace.
    pub async fn resolve(&self, reference: &str) -> Result<ImageConfig, ImageError> {
        let image_ref = ImageRef::parse(reference)?;
        let lease = OnceCell::new();
        let result = self.resolve_leased(&image_ref, reference, &lease).await;
        if let Some(id) = lease.get() {
            self.delete_lease(id).await;
        }
        result
    }

    /// The digest of the image record's target (manifest or index) of
    /// `reference`, `None` when the image is not in the namespace: one call,
    /// for a caller that keeps configs by digest.
    pub async fn target_digest(&self, reference: &str) -> Result<Option<String>, ImageError> {
        let image_ref = ImageRef::parse(reference)?;
        Ok(self.get_image(&image_ref.to_string(), reference).await?.map(|t| t.digest))
    }

    async fn resolve_leased(
        &self,
        image_ref: &ImageRef,
        given: &str,
        lease: &OnceCell<String>,
    ) -> Result<ImageConfig, ImageError> {
        let name = image_ref.to_string();
        let target = match self.get_image(&name, given).await? {
            Some(target) => target,
            None => {
                let lease_id = lease.get_or_try_init(|| self.create_lease(&name)).await?;
                self.pull(image_ref, lease_id).await?
            }
        };
        let (manifest, config_digest) = self.read_manifest(&name, &target).await?;
        let config_bytes = self.read_blob(&name, &config_digest).await?;
        let config: ConfigBlob = serde_json::from_slice(&config_bytes)
            .map_err(|e| ImageError::bad(&name, "image config", &config_digest, e))?;
        let chain_id = self.ensure_unpacked(&name, &manifest, &config, &config_digest, lease).await?;
        let c = config.config.unwrap_or_default();
        let mut labels: Vec<(String, String)> = c.labels.unwrap_or_default().into_iter().collect();
        labels.sort();
        Ok(ImageConfig {
            env: c.env.unwrap_or_default(),
            entrypoint: c.entrypoint.unwrap_or_default(),
            cmd: c.cmd.unwrap_or_default(),
            user: c.user.unwrap_or_default(),
            working_dir: c.working_dir.unwrap_or_default(),
            labels,
            chain_id,
            target_digest: target.digest,
        })
    }

    /// The target of the image record `name` (or, when that is not there,
    /// of `given` as it was written: `ctr import` keeps the names it is
    /// given); `None` when neither is in the namespace.
    async fn get_image(&self, name: &str, given: &str) -> Result<Option<ApiDescriptor>, ImageError> {
        let mut client = ImagesClient::new(self.channel.clone());
        let mut names = vec![name];
        if given != name {
            names.push(given);
        }
        for candidate in names {
            let request = self.request(GetImageRequest { name: candidate.to_string() }, None);
            match client.get(request).await {
                Ok(response) => {
                    let target = response.into_inner().image.and_then(|image| image.target);
                    if let Some(target) = target {
                        return Ok(Some(target));
                    }
                }
                Err(status) if status.code() == Code::NotFound => {}
                Err(status) => return Err(ImageError::containerd(name, "Images.Get", status)),
            }
        }
        Ok(None)
    }

    /// The manifest `target` is or (for an index) points to for this
    /// machine's platform, and the digest of its config.
    async fn read_manifest(
        &self,
        image: &str,
        target: &ApiDescriptor,
    ) -> Result<(ManifestOrIndex, String), ImageError> {
        let mut digest = target.digest.clone();
        // An index may point to an index; two levels is plenty.
        for _ in 0..3 {
            let bytes = self.read_blob(image, &digest).await?;
            let parsed: ManifestOrIndex =
                serde_json::from_slice(&bytes).map_err(|e| ImageError::bad(image, "manifest", &digest, e))?;
            if parsed.is_index() {
                let platform = manifest::host_platform();
                let chosen = manifest::choose_manifest(&parsed.manifests, platform).ok_or_else(|| {
                    ImageError::NoMatchingPlatform {
                        image: image.to_string(),
                        platform: format!("{}/{}/{}", platform.0, platform.1, platform.2),
                        digest: digest.clone(),
                    }
                })?;
                digest = chosen.digest.clone();
                continue;
            }
            let config_digest = match &parsed.config {
                Some(config) => config.digest.clone(),
                None => return Err(ImageError::bad(image, "manifest", &digest, "it has no config")),
            };
            return Ok((parsed, config_digest));
        }
        Err(ImageError::bad(image, "index", &digest, "indexes nest too deep"))
    }

    /// `message` as a request in the namespace (and lease).
    fn request<T>(&self, message: T, lease: Option<&str>) -> Request<T> {
        let mut request = Request::new(message);
        // Validated in new().
        if let Ok(value) = MetadataValue::try_from(self.namespace.as_str()) {
            request.metadata_mut().insert(NAMESPACE_HEADER, value);
        }
        if let Some(Ok(value)) = lease.map(MetadataValue::try_from) {
            request.metadata_mut().insert(LEASE_HEADER, value);
        }
        request
    }
}

/// A name no other call of this or another process uses at the same time
/// (temporary snapshot keys, ingest refs, lease ids).
fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = ank_common::daemon::clock::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{}-{}-{nanos}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}
