//! Unpacking an image's layers into snapshots: one committed snapshot per
//! layer, named by the chain id of the layers up to it, each prepared on
//! its parent's, filled by containerd's diff service and committed.

use std::collections::HashMap;

use containerd_client::services::v1::ApplyRequest;
use containerd_client::services::v1::diff_client::DiffClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, PrepareSnapshotRequest, RemoveSnapshotRequest, StatSnapshotRequest,
};
use containerd_client::types::Descriptor as ApiDescriptor;
use tokio::sync::OnceCell;
use tonic::Code;

use super::error::ImageError;
use super::manifest::{ConfigBlob, Descriptor, ManifestOrIndex, chain_ids};
use super::{Images, unique_suffix};

/// The content label by which an image's config keeps its top snapshot
/// from containerd's garbage collector (as containerd's own unpacker sets).
const GC_REF_SNAPSHOT: &str = "containerd.io/gc.ref.snapshot.";

impl Images {
    /// Makes sure the layers of `manifest` are unpacked for the
    /// snapshotter; returns the image's chain id.
    pub(super) async fn ensure_unpacked(
        &self,
        image: &str,
        manifest: &ManifestOrIndex,
        config: &ConfigBlob,
        config_digest: &str,
        lease: &OnceCell<String>,
    ) -> Result<String, ImageError> {
        let diff_ids = &config.rootfs.diff_ids;
        if diff_ids.is_empty() || diff_ids.len() != manifest.layers.len() {
            return Err(ImageError::bad(
                image,
                "image config",
                config_digest,
                format!("it has {} diff ids for {} layers", diff_ids.len(), manifest.layers.len()),
            ));
        }
        let chain = chain_ids(diff_ids);
        let top = chain[chain.len() - 1].clone();
        if self.snapshot_exists(image, &top).await? {
            return Ok(top);
        }
        let lease_id = lease.get_or_try_init(|| self.create_lease(image)).await?;
        for (n, layer) in manifest.layers.iter().enumerate() {
            if self.snapshot_exists(image, &chain[n]).await? {
                continue;
            }
            let parent = if n == 0 { "" } else { chain[n - 1].as_str() };
            self.unpack_layer(image, layer, &diff_ids[n], &chain[n], parent, lease_id).await?;
        }
        let label = HashMap::from([(format!("{GC_REF_SNAPSHOT}{}", self.snapshotter), top.clone())]);
        self.label_blob(image, config_digest, label).await?;
        Ok(top)
    }

    /// Whether the snapshotter has the snapshot `key`.
    pub(super) async fn snapshot_exists(&self, image: &str, key: &str) -> Result<bool, ImageError> {
        let mut client = SnapshotsClient::new(self.channel.clone());
        let request =
            self.request(StatSnapshotRequest { snapshotter: self.snapshotter.clone(), key: key.to_string() }, None);
        match client.stat(request).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::NotFound => Ok(false),
            Err(status) => Err(ImageError::containerd(image, "Snapshots.Stat", status)),
        }
    }

    /// Unpacks `layer` on the snapshot `parent` into the committed snapshot
    /// `chain_id`. Another unpack committing it first is success.
    async fn unpack_layer(
        &self,
        image: &str,
        layer: &Descriptor,
        diff_id: &str,
        chain_id: &str,
        parent: &str,
        lease: &str,
    ) -> Result<(), ImageError> {
        let key = format!("ank-extract-{}-{chain_id}", unique_suffix());
        let mut snapshots = SnapshotsClient::new(self.channel.clone());
        let prepared = snapshots
            .prepare(self.request(
                PrepareSnapshotRequest {
                    snapshotter: self.snapshotter.clone(),
                    key: key.clone(),
                    parent: parent.to_string(),
                    labels: HashMap::new(),
                },
                Some(lease),
            ))
            .await;
        let mounts = match prepared {
            Ok(response) => response.into_inner().mounts,
            Err(status) => return Err(ImageError::containerd(image, "Snapshots.Prepare", status)),
        };
        let result = self.apply_and_commit(image, layer, diff_id, chain_id, &key, mounts, lease).await;
        if result.is_err() || matches!(result, Ok(false)) {
            let _ = snapshots
                .remove(self.request(
                    RemoveSnapshotRequest { snapshotter: self.snapshotter.clone(), key: key.clone() },
                    Some(lease),
                ))
                .await;
        }
        result.map(|_| ())
    }

    /// Applies `layer` to the mounts of the active snapshot `key` and
    /// commits it as `chain_id`: `Ok(false)` when another unpack had
    /// committed it first (`key` is then left to remove).
    #[allow(clippy::too_many_arguments)]
    async fn apply_and_commit(
        &self,
        image: &str,
        layer: &Descriptor,
        diff_id: &str,
        chain_id: &str,
        key: &str,
        mounts: Vec<containerd_client::types::Mount>,
        lease: &str,
    ) -> Result<bool, ImageError> {
        let mut diff = DiffClient::new(self.channel.clone());
        let applied = diff
            .apply(self.request(
                ApplyRequest {
                    diff: Some(ApiDescriptor {
                        media_type: layer.media_type.clone(),
                        digest: layer.digest.clone(),
                        size: layer.size,
                        annotations: layer.annotations.clone(),
                    }),
                    mounts,
                    ..Default::default()
                },
                Some(lease),
            ))
            .await
            .map_err(|s| ImageError::containerd(image, "Diff.Apply", s))?
            .into_inner()
            .applied
            .map(|d| d.digest)
            .unwrap_or_default();
        if applied != diff_id {
            return Err(ImageError::DiffIdMismatch {
                image: image.to_string(),
                layer: layer.digest.clone(),
                expected: diff_id.to_string(),
                actual: applied,
            });
        }
        let mut snapshots = SnapshotsClient::new(self.channel.clone());
        let committed = snapshots
            .commit(self.request(
                CommitSnapshotRequest {
                    snapshotter: self.snapshotter.clone(),
                    name: chain_id.to_string(),
                    key: key.to_string(),
                    ..Default::default()
                },
                Some(lease),
            ))
            .await;
        match committed {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::AlreadyExists => Ok(false),
            Err(status) => Err(ImageError::containerd(image, "Snapshots.Commit", status)),
        }
    }
}
