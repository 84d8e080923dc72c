//! The layout of Ankaios' `ank.conf`: the same keys at the top level and in
//! table `[default]`, the table winning key by key.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::{ArgMatches, ConfigFileError, ConfigKeys, parse_with_unknown_keys, unknown_key_warning};

/// Keys `K` at the top level of a config file and in its `[default]` table.
#[derive(Debug, Default)]
pub struct WithDefaultTable<K> {
    pub top: K,
    pub default: Option<K>,
}

/// Only the `[default]` table.
#[derive(Deserialize)]
struct DefaultTable<K> {
    default: Option<K>,
}

impl<K: ConfigKeys + DeserializeOwned + Default> ConfigKeys for WithDefaultTable<K> {
    type Target = K::Target;

    /// Reads the file twice, the top level and then the table (one struct
    /// with `#[serde(flatten)]` would hide unknown keys and error lines).
    /// Top-level keys come first in a TOML file, so the first error is the
    /// same as in one pass.
    fn parse(path: &str, text: &str) -> Result<(Self, Vec<String>), ConfigFileError> {
        let (top, top_unknown) = parse_with_unknown_keys::<K>(path, text)?;
        let (table, table_unknown) = parse_with_unknown_keys::<DefaultTable<K>>(path, text)?;
        let unknown = top_unknown.into_iter().filter(|key| key != "default");
        let unknown = unknown.chain(table_unknown.into_iter().filter(|key| key.starts_with("default.")));
        let warnings = unknown.map(|key| unknown_key_warning(path, &key)).collect();
        Ok((Self { top, default: table.default }, warnings))
    }

    fn or(self, other: Self) -> Self {
        Self { top: self.top.or(other.top), default: self.default.or(other.default) }
    }

    fn check_pairs(&self, file: &str, prefix: &str) -> Result<(), ConfigFileError> {
        self.top.check_pairs(file, prefix)?;
        match &self.default {
            Some(table) => table.check_pairs(file, &format!("{prefix}default.")),
            None => Ok(()),
        }
    }

    fn merge_into(self, target: &mut Self::Target, m: &ArgMatches) {
        self.default.unwrap_or_default().or(self.top).merge_into(target, m);
    }
}
