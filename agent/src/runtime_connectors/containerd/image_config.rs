//! [`ImageConfig`]: what a container takes from its image (the OCI image
//! config's `config` object) and where its unpacked root file system is.

/// The parts of an image's configuration a container is built from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// `Env`, as `KEY=VALUE`.
    pub env: Vec<String>,
    /// `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    pub cmd: Vec<String>,
    /// `User` (`""` when unset).
    pub user: String,
    /// `WorkingDir` (`""` when unset).
    pub working_dir: String,
    /// `Labels`.
    pub labels: Vec<(String, String)>,
    /// The chain id of the image's layers: the snapshot a container's
    /// root file system is prepared from.
    pub chain_id: String,
    /// The digest of the image's target (manifest or index) descriptor.
    pub target_digest: String,
}
