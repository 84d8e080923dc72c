//! The one loader of the config files of `ank-server`, `ank-agent` and
//! `ank`: chooses the file (`-x`, else the first default that exists),
//! reads and checks it, and fills the parsed command line from it with the
//! precedence flag, then environment variable, then file, then built-in
//! default. What the keys are and where they go, each binary describes with
//! [`config_keys!`](crate::config_keys).

use std::path::{Path, PathBuf};

use clap::ArgMatches;

use super::{ConfigFileError, ConfigKeys, Loaded, choose_path};

/// Reads and checks config file `path`; also returns the warnings about the
/// keys that are ignored.
pub fn read<K: ConfigKeys>(path: &Path) -> Result<(K, Vec<String>), ConfigFileError> {
    let label = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read { path: label.clone(), source })?;
    let (keys, warnings) = K::parse(&label, &text)?;
    keys.check_pairs(&label, "")?;
    Ok((keys, warnings))
}

/// Reads the config file `explicit` names, else the first of `defaults`
/// that exists, and fills the values of `target` that came from neither
/// flag nor environment. Returns the file used, if any, and the warnings.
pub fn apply<K: ConfigKeys>(
    target: &mut K::Target,
    m: &ArgMatches,
    explicit: Option<&Path>,
    defaults: &[PathBuf],
) -> Result<Loaded, ConfigFileError> {
    let Some(path) = choose_path(explicit, defaults, Path::exists)? else {
        return Ok(Loaded::default());
    };
    let (keys, warnings) = read::<K>(&path)?;
    keys.merge_into(target, m);
    Ok(Loaded { path: Some(path), warnings })
}
