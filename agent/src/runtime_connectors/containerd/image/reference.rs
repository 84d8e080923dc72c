//! Image references normalised as docker and nerdctl do: `busybox` is
//! `docker.io/library/busybox:latest`, `localhost/busybox` is
//! `localhost/busybox:latest`, a digest (`@sha256:…`) is kept and then no
//! `:latest` is added.

use super::error::ImageError;

/// Docker Hub's canonical domain.
const DOCKER_HUB: &str = "docker.io";

/// A normalised image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// The registry's host (and port): `docker.io`, `localhost:5000`.
    pub domain: String,
    /// The repository path in the registry: `library/busybox`.
    pub repository: String,
    /// The tag, if any (`latest` when neither tag nor digest was given).
    pub tag: Option<String>,
    /// The digest, if any (`sha256:…`).
    pub digest: Option<String>,
}

impl ImageRef {
    /// Normalises `reference`.
    pub fn parse(reference: &str) -> Result<Self, ImageError> {
        let invalid = |reason: &str| ImageError::InvalidReference {
            reference: reference.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = reference.trim();
        if trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        let (name_and_tag, digest) = match trimmed.split_once('@') {
            Some((name, digest)) => {
                let Some((algorithm, hex)) = digest.split_once(':') else {
                    return Err(invalid("the digest has no algorithm"));
                };
                let valid_hex =
                    !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
                if algorithm != "sha256" || hex.len() != 64 || !valid_hex {
                    return Err(invalid("the digest is not sha256 with 64 hex digits"));
                }
                (name, Some(digest.to_string()))
            }
            None => (trimmed, None),
        };
        // A tag is after the last ':' of the last path component (a ':'
        // before a '/' is a registry's port).
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => {
                let at = last_slash + i;
                (&name_and_tag[..at], Some(name_and_tag[at + 1..].to_string()))
            }
            None => (name_and_tag, None),
        };
        if let Some(tag) = &tag {
            let valid = !tag.is_empty()
                && tag.len() <= 128
                && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
                && !tag.starts_with(['.', '-']);
            if !valid {
                return Err(invalid("the tag is not valid"));
            }
        }
        let (domain, repository) = match name.split_once('/') {
            Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        let domain = if domain == "index.docker.io" { DOCKER_HUB.to_string() } else { domain };
        let repository = if domain == DOCKER_HUB && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        let valid_repository = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                    && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && part.ends_with(|c: char| c.is_ascii_alphanumeric())
            });
        if !valid_repository {
            return Err(invalid("the repository must be lowercase letters, digits and separators"));
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_string()),
            _ => tag,
        };
        Ok(ImageRef { domain, repository, tag, digest })
    }

    /// Whether its registry is on this machine (`localhost`, `127.0.0.1`,
    /// `[::1]`, with any port): the only ones pulled over plain http.
    pub fn is_local_registry(&self) -> bool {
        let host = match self.domain.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => self.domain.as_str(),
        };
        matches!(host, "localhost" | "127.0.0.1" | "[::1]")
    }
}

impl std::fmt::Display for ImageRef {
    /// The normalised name: containerd's image record name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.domain, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ImageRef;

    fn norm(reference: &str) -> String {
        match ImageRef::parse(reference) {
            Ok(r) => r.to_string(),
            Err(e) => format!("error: {e}"),
        }
    }

    const DIGEST: &str = "sha256:269ff3e78d35313634f61ec1969ea29569fe62046ae815a69df3254d16963462";

    #[test]
    fn containerd_normalises_like_docker() {
        assert_eq!(norm("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(norm("library/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("user/app:v1"), "docker.io/user/app:v1");
        assert_eq!(norm("index.docker.io/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(norm("localhost/busybox"), "localhost/busybox:latest");
        assert_eq!(norm("localhost:5000/a/b:c"), "localhost:5000/a/b:c");
        assert_eq!(norm("ghcr.io/eclipse-ankaios/app"), "ghcr.io/eclipse-ankaios/app:latest");
        assert_eq!(norm(&format!("busybox@{DIGEST}")), format!("docker.io/library/busybox@{DIGEST}"));
        assert_eq!(norm(&format!("localhost:5000/busybox:1@{DIGEST}")), format!("localhost:5000/busybox:1@{DIGEST}"));
    }

    #[test]
    fn containerd_rejects_invalid_references() {
        for bad in ["", "Busybox", "busybox:", "busybox@sha256:abc", "a//b", "busybox:-x", "busybox@md5:00"] {
            assert!(norm(bad).starts_with("error: invalid image reference"), "{bad}: {}", norm(bad));
        }
    }

    #[test]
    fn containerd_local_registries_are_the_loopback_ones() {
        let local = |r: &str| ImageRef::parse(r).map(|r| r.is_local_registry()).ok();
        assert_eq!(local("localhost/busybox"), Some(true));
        assert_eq!(local("localhost:5000/busybox"), Some(true));
        assert_eq!(local("127.0.0.1:5000/busybox"), Some(true));
        assert_eq!(local("busybox"), Some(false));
        assert_eq!(local("localhost.example.com/busybox"), Some(false));
    }
}
