//! containerd's content store (blobs by digest) and leases: reading a blob,
//! writing one from a stream, labelling one, and the lease a resolve works
//! under.

use std::collections::HashMap;
use std::time::Duration;

use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::{
    AbortRequest, CreateRequest, DeleteRequest, Info, InfoRequest, ReadContentRequest, UpdateRequest, WriteAction,
    WriteContentRequest,
};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::Code;

use super::error::ImageError;
use super::manifest::{Descriptor, digest_of};
use super::{Images, MAX_JSON_BLOB, unique_suffix};

/// How long a lease outlives a resolve that could not delete it.
const LEASE_EXPIRY: Duration = Duration::from_secs(3600);

impl Images {
    /// The blob `digest` (a manifest, index or config: at most
    /// [`MAX_JSON_BLOB`] bytes), checked against its digest.
    pub(super) async fn read_blob(&self, image: &str, digest: &str) -> Result<Vec<u8>, ImageError> {
        let mut client = ContentClient::new(self.channel.clone());
        let request = self.request(ReadContentRequest { digest: digest.to_string(), offset: 0, size: 0 }, None);
        let mut stream =
            client.read(request).await.map_err(|s| ImageError::containerd(image, "Content.Read", s))?.into_inner();
        let mut data = Vec::new();
        while let Some(chunk) = stream.message().await.map_err(|s| ImageError::containerd(image, "Content.Read", s))? {
            data.extend_from_slice(&chunk.data);
            if data.len() > MAX_JSON_BLOB {
                return Err(ImageError::bad(image, "blob", digest, "it is too large"));
            }
        }
        let actual = digest_of(&data);
        if actual != digest {
            return Err(ImageError::bad(image, "blob", digest, format!("its content has digest {actual}")));
        }
        Ok(data)
    }

    /// Whether the content store has the blob `digest`.
    pub(super) async fn blob_exists(&self, image: &str, digest: &str) -> Result<bool, ImageError> {
        let mut client = ContentClient::new(self.channel.clone());
        let request = self.request(InfoRequest { digest: digest.to_string() }, None);
        match client.info(request).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == Code::NotFound => Ok(false),
            Err(status) => Err(ImageError::containerd(image, "Content.Info", status)),
        }
    }

    /// Writes the blob `descriptor` from `data` with `labels`, under
    /// `lease`; containerd checks its size and digest when it commits it.
    /// A blob that is already there (or that another writer commits first)
    /// is success. An error of `data` is returned as a registry error.
    pub(super) async fn write_blob<S, E>(
        &self,
        image: &str,
        descriptor: &Descriptor,
        labels: HashMap<String, String>,
        data: S,
        lease: &str,
    ) -> Result<(), ImageError>
    where
        S: Stream<Item = Result<Vec<u8>, E>> + Send + 'static,
        E: std::fmt::Display,
    {
        let reference = format!("ank-{}-{}", descriptor.digest, unique_suffix());
        let (tx, rx) = tokio::sync::mpsc::channel::<WriteContentRequest>(4);
        let message = |action: WriteAction, offset: i64, data: Vec<u8>| WriteContentRequest {
            action: action as i32,
            r#ref: reference.clone(),
            total: descriptor.size,
            expected: descriptor.digest.clone(),
            offset,
            data,
            labels: HashMap::new(),
        };
        let feed = async {
            let mut offset = 0i64;
            let mut data = std::pin::pin!(data);
            while let Some(chunk) = data.next().await {
                let chunk = chunk?;
                let len = chunk.len() as i64;
                if tx.send(message(WriteAction::Write, offset, chunk)).await.is_err() {
                    // containerd ended the call: its answer tells why.
                    return Ok(());
                }
                offset += len;
            }
            let mut commit = message(WriteAction::Commit, offset, Vec::new());
            commit.labels = labels;
            let _ = tx.send(commit).await;
            drop(tx);
            Ok::<(), E>(())
        };
        let mut client = ContentClient::new(self.channel.clone());
        let request = self.request(ReceiverStream::new(rx), Some(lease));
        let answer = async {
            let mut responses = client.write(request).await?.into_inner();
            let mut committed = None;
            while let Some(response) = responses.message().await? {
                if response.action == WriteAction::Commit as i32 {
                    committed = Some(response.digest);
                }
            }
            Ok::<_, tonic::Status>(committed)
        };
        let (fed, answered) = tokio::join!(feed, answer);
        let outcome = match (fed, answered) {
            (_, Err(status)) if status.code() == Code::AlreadyExists => Ok(()),
            (Err(reason), _) => Err(ImageError::Registry {
                image: image.to_string(),
                reason: format!("blob {}: {reason}", descriptor.digest),
            }),
            (Ok(()), Err(status)) => Err(ImageError::containerd(image, "Content.Write", status)),
            (Ok(()), Ok(Some(digest))) if digest == descriptor.digest => Ok(()),
            (Ok(()), Ok(committed)) => {
                Err(ImageError::bad(image, "blob", &descriptor.digest, format!("containerd committed {committed:?}")))
            }
        };
        if outcome.is_err() {
            let mut client = ContentClient::new(self.channel.clone());
            let _ = client.abort(self.request(AbortRequest { r#ref: reference.clone() }, None)).await;
        }
        outcome
    }

    /// Sets `labels` on the blob `digest` (other labels stay).
    pub(super) async fn label_blob(
        &self,
        image: &str,
        digest: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), ImageError> {
        let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
        let mut client = ContentClient::new(self.channel.clone());
        let request = self.request(
            UpdateRequest {
                info: Some(Info { digest: digest.to_string(), labels, ..Default::default() }),
                update_mask: Some(prost_types::FieldMask { paths }),
            },
            None,
        );
        client.update(request).await.map_err(|s| ImageError::containerd(image, "Content.Update", s))?;
        Ok(())
    }

    /// A new lease that expires by itself after [`LEASE_EXPIRY`].
    pub(super) async fn create_lease(&self, image: &str) -> Result<String, ImageError> {
        let id = format!("ank-image-{}", unique_suffix());
        let expiry = ank_common::timestamp::rfc3339_utc(ank_common::daemon::clock::now() + LEASE_EXPIRY);
        let labels = HashMap::from([("containerd.io/gc.expire".to_string(), expiry)]);
        let mut client = LeasesClient::new(self.channel.clone());
        client
            .create(self.request(CreateRequest { id: id.clone(), labels }, None))
            .await
            .map_err(|s| ImageError::containerd(image, "Leases.Create", s))?;
        Ok(id)
    }

    /// Deletes the lease `id` (what it kept is then kept by the image, or
    /// collected); a failure only leaves it to expire.
    pub(super) async fn delete_lease(&self, id: &str) {
        let mut client = LeasesClient::new(self.channel.clone());
        let request = self.request(DeleteRequest { id: id.to_string(), sync: false }, None);
        if let Err(status) = client.delete(request).await {
            tracing::debug!("containerd lease {id} not deleted (it expires): {status}");
        }
    }
}
