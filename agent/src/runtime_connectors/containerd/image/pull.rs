//! Pulling an image from its registry into containerd's content store (as
//! `ctr pull` does without the Transfer service, which containerd 1.6 does
//! not have): the manifest (and index), config and layers are written with
//! the labels by which the manifest keeps its blobs from the garbage
//! collector, then the image record is created.
//!
//! Registries are spoken to over https, except those on this machine
//! (`localhost`, `127.0.0.1`, `[::1]`, any port), which are spoken to over
//! plain http (as a local test or mirror registry usually is). Credentials:
//! docker's `config.json` (`$DOCKER_CONFIG` or `~/.docker`) basic `auth`
//! entries, else anonymous.

use std::collections::HashMap;

use base64::Engine;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{CreateImageRequest, Image};
use containerd_client::types::Descriptor as ApiDescriptor;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use tokio_stream::StreamExt;
use tonic::Code;

use super::Images;
use super::error::ImageError;
use super::manifest::{self, Descriptor, ManifestOrIndex, digest_of, media};
use super::reference::ImageRef;

/// The label prefix by which a manifest or index keeps a blob.
const GC_REF_CONTENT: &str = "containerd.io/gc.ref.content.";

impl Images {
    /// Pulls `image` under `lease` and creates its image record; returns
    /// its target. A registry that cannot be reached or has no such image
    /// is [`ImageError::NotFound`].
    pub(super) async fn pull(&self, image: &ImageRef, lease: &str) -> Result<ApiDescriptor, ImageError> {
        let name = image.to_string();
        let not_found =
            |reason: String| ImageError::NotFound { image: name.clone(), namespace: self.namespace.clone(), reason };
        let registry_error = |e: oci_client::errors::OciDistributionError| ImageError::Registry {
            image: name.clone(),
            reason: with_sources(&e),
        };
        // reqwest is built without a TLS provider of its own: ring's, as
        // the rest of the agent uses (an error means one is installed).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if image.is_local_registry() {
            ClientProtocol::HttpsExcept(vec![image.domain.clone()])
        } else {
            ClientProtocol::Https
        };
        let client = Client::try_from(ClientConfig { protocol, ..Default::default() })
            .map_err(|e| not_found(with_sources(&e)))?;
        let top_ref = match &image.digest {
            Some(digest) => Reference::with_digest(image.domain.clone(), image.repository.clone(), digest.clone()),
            None => Reference::with_tag(
                image.domain.clone(),
                image.repository.clone(),
                image.tag.clone().unwrap_or_else(|| "latest".to_string()),
            ),
        };
        let auth = docker_config_auth(&image.domain);
        let (top_bytes, top_digest) =
            client.pull_manifest_raw(&top_ref, &auth, &media::ALL).await.map_err(|e| not_found(with_sources(&e)))?;
        if image.digest.as_ref().is_some_and(|wanted| *wanted != top_digest) {
            return Err(ImageError::bad(
                &name,
                "manifest",
                &top_digest,
                "the registry sent another digest than the reference's",
            ));
        }
        let top = self.parse(&name, &top_bytes, &top_digest)?;
        let top_descriptor = describe(&top, &top_bytes, &top_digest);
        let (manifest, manifest_bytes, manifest_descriptor) = if top.is_index() {
            let platform = manifest::host_platform();
            let chosen = manifest::choose_manifest(&top.manifests, platform)
                .ok_or_else(|| ImageError::NoMatchingPlatform {
                    image: name.clone(),
                    platform: format!("{}/{}/{}", platform.0, platform.1, platform.2),
                    digest: top_digest.clone(),
                })?
                .clone();
            let by_digest =
                Reference::with_digest(image.domain.clone(), image.repository.clone(), chosen.digest.clone());
            let (bytes, digest) =
                client.pull_manifest_raw(&by_digest, &auth, &media::ALL).await.map_err(registry_error)?;
            let parsed = self.parse(&name, &bytes, &digest)?;
            let descriptor = describe(&parsed, &bytes, &digest);
            (parsed, bytes, descriptor)
        } else {
            (top.clone(), top_bytes.clone(), top_descriptor.clone())
        };
        let Some(config) = manifest.config.clone() else {
            return Err(ImageError::bad(&name, "manifest", &manifest_descriptor.digest, "it has no config"));
        };
        let mut manifest_labels = HashMap::from([(format!("{GC_REF_CONTENT}config"), config.digest.clone())]);
        for blob in std::iter::once(&config).chain(&manifest.layers) {
            if self.blob_exists(&name, &blob.digest).await? {
                continue;
            }
            let stream = client.pull_blob_stream(&top_ref, blob.digest.as_str()).await.map_err(registry_error)?;
            let data = stream.map(|chunk| chunk.map(|b| b.to_vec()).map_err(|e| with_sources(&e)));
            self.write_blob(&name, blob, HashMap::new(), data, lease).await?;
        }
        for (n, layer) in manifest.layers.iter().enumerate() {
            manifest_labels.insert(format!("{GC_REF_CONTENT}l.{n}"), layer.digest.clone());
        }
        self.write_bytes(&name, &manifest_descriptor, manifest_labels, manifest_bytes.to_vec(), lease).await?;
        if top.is_index() {
            let index_labels = top
                .manifests
                .iter()
                .enumerate()
                .filter(|(_, m)| m.digest == manifest_descriptor.digest)
                .map(|(n, m)| (format!("{GC_REF_CONTENT}m.{n}"), m.digest.clone()))
                .collect();
            self.write_bytes(&name, &top_descriptor, index_labels, top_bytes.to_vec(), lease).await?;
        }
        let target = ApiDescriptor {
            media_type: top_descriptor.media_type.clone(),
            digest: top_descriptor.digest.clone(),
            size: top_descriptor.size,
            annotations: HashMap::new(),
        };
        self.create_image(&name, target.clone(), lease).await?;
        Ok(target)
    }

    /// A manifest or index from the registry, checked against its digest.
    fn parse(&self, image: &str, bytes: &[u8], digest: &str) -> Result<ManifestOrIndex, ImageError> {
        if digest_of(bytes) != digest {
            return Err(ImageError::bad(image, "manifest", digest, "its content has another digest"));
        }
        serde_json::from_slice(bytes).map_err(|e| ImageError::bad(image, "manifest", digest, e))
    }

    /// Writes a blob held in memory.
    async fn write_bytes(
        &self,
        image: &str,
        descriptor: &Descriptor,
        labels: HashMap<String, String>,
        bytes: Vec<u8>,
        lease: &str,
    ) -> Result<(), ImageError> {
        let data = tokio_stream::iter([Ok::<_, std::convert::Infallible>(bytes)]);
        self.write_blob(image, descriptor, labels, data, lease).await
    }

    /// Creates the image record `name`; one created at the same time by
    /// another pull is success.
    async fn create_image(&self, name: &str, target: ApiDescriptor, lease: &str) -> Result<(), ImageError> {
        let mut client = ImagesClient::new(self.channel.clone());
        let request = self.request(
            CreateImageRequest {
                image: Some(Image { name: name.to_string(), target: Some(target), ..Default::default() }),
                ..Default::default()
            },
            Some(lease),
        );
        match client.create(request).await {
            Ok(_) => Ok(()),
            Err(status) if status.code() == Code::AlreadyExists => Ok(()),
            Err(status) => Err(ImageError::containerd(name, "Images.Create", status)),
        }
    }
}

/// `error` and its sources, `: `-separated (reqwest's own message leaves
/// out why a request failed, such as a refused connection).
fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The descriptor of a manifest or index pulled as `bytes`.
fn describe(parsed: &ManifestOrIndex, bytes: &[u8], digest: &str) -> Descriptor {
    let media_type = parsed
        .media_type
        .clone()
        .unwrap_or_else(|| if parsed.is_index() { media::OCI_INDEX } else { media::OCI_MANIFEST }.to_string());
    Descriptor { media_type, digest: digest.to_string(), size: bytes.len() as i64, ..Default::default() }
}

/// The credentials docker's `config.json` has for `domain` (basic `auth`
/// entries only), else anonymous.
fn docker_config_auth(domain: &str) -> RegistryAuth {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".docker")));
    let Some(text) = dir.and_then(|dir| std::fs::read_to_string(dir.join("config.json")).ok()) else {
        return RegistryAuth::Anonymous;
    };
    auth_from_config(&text, domain).unwrap_or(RegistryAuth::Anonymous)
}

/// The basic credentials of `domain` in the text of a docker `config.json`.
fn auth_from_config(text: &str, domain: &str) -> Option<RegistryAuth> {
    let config: serde_json::Value = serde_json::from_str(text).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let host_of = |key: &str| {
        let without_scheme = key.split_once("://").map_or(key, |(_, rest)| rest);
        without_scheme.split('/').next().unwrap_or_default().to_string()
    };
    let wanted = |key: &str| {
        let host = host_of(key);
        host == domain || (domain == "docker.io" && matches!(host.as_str(), "index.docker.io" | "registry-1.docker.io"))
    };
    let encoded = auths
        .iter()
        .find(|(key, _)| wanted(key))
        .and_then(|(_, entry)| entry.get("auth")?.as_str().map(str::to_string))?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let (user, password) =
        String::from_utf8(decoded).ok()?.split_once(':').map(|(u, p)| (u.to_string(), p.to_string()))?;
    Some(RegistryAuth::Basic(user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_docker_config_gives_basic_auth() {
        let text = r#"{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"},"localhost:5000":{"auth":"YTpiOmM="}}}"#;
        let basic = |domain| match auth_from_config(text, domain) {
            Some(RegistryAuth::Basic(u, p)) => Some(format!("{u}/{p}")),
            _ => None,
        };
        assert_eq!(basic("docker.io"), Some("u/p".to_string()));
        assert_eq!(basic("localhost:5000"), Some("a/b:c".to_string()));
        assert_eq!(basic("ghcr.io"), None);
    }
}
