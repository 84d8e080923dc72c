//! How a binary describes its config file: [`ConfigKeys`], which
//! [`config_keys!`](crate::config_keys) implements from one table of keys
//! per binary, and the steps its generated code takes: a key fills its
//! flag's value unless flag or environment gave one ([`fill`]), a PEM item
//! replaces path and content together ([`fill_pem`]).

use std::collections::BTreeMap;

use clap::ArgMatches;

use super::ConfigFileError;

/// The keys of a binary's config file (or of one of its tables) and where
/// they go in its parsed command line.
pub trait ConfigKeys: Sized {
    /// The parsed command line that the file's values fill.
    type Target;
    /// Parses the text of config file `path`; also returns the warnings
    /// about the keys that are ignored.
    fn parse(path: &str, text: &str) -> Result<(Self, Vec<String>), ConfigFileError>;
    /// `self` over `other`, key by key.
    fn or(self, other: Self) -> Self;
    /// Fails when a path key and its `_content` key are both set; `prefix`
    /// is the dotted table the keys stand in (`default.`), for the error.
    fn check_pairs(&self, file: &str, prefix: &str) -> Result<(), ConfigFileError>;
    /// Fills every value of `target` that neither its flag nor its
    /// environment variable gave.
    fn merge_into(self, target: &mut Self::Target, m: &ArgMatches);
}

/// A value of the parsed command line that a key of type `T` can fill.
pub trait Slot<T> {
    fn put(&mut self, value: T);
}

impl<T> Slot<T> for T {
    fn put(&mut self, value: T) {
        *self = value;
    }
}

/// An optional flag: the file's value makes it given.
impl<T> Slot<T> for Option<T> {
    fn put(&mut self, value: T) {
        *self = Some(value);
    }
}

/// A repeatable `NAME=VALUE` flag filled from a table of the file.
impl<K, V> Slot<BTreeMap<K, V>> for Vec<(K, V)> {
    fn put(&mut self, value: BTreeMap<K, V>) {
        *self = value.into_iter().collect();
    }
}

/// Whether argument `id` came from the command line or the environment,
/// which both beat the config file.
pub fn given(m: &ArgMatches, id: &str) -> bool {
    use clap::parser::ValueSource;
    matches!(m.value_source(id), Some(ValueSource::CommandLine | ValueSource::EnvVariable))
}

/// Puts the file's value into `slot` unless flag or environment gave one.
pub fn fill<T>(slot: &mut impl Slot<T>, from_file: Option<T>, m: &ArgMatches, id: &str) {
    if let Some(value) = from_file
        && !given(m, id)
    {
        slot.put(value);
    }
}

/// A PEM item (`id`): unless flag or environment gave its path, the file's
/// path and content both replace what the command line had.
pub fn fill_pem<P>(
    slots: (&mut Option<P>, &mut Option<crate::tls::PemText>),
    from_file: (Option<P>, Option<crate::tls::PemText>),
    m: &ArgMatches,
    id: &str,
) {
    if !given(m, id) {
        (*slots.0, *slots.1) = from_file;
    }
}

/// The argument id of a field path: its last field (`scheduling.max_workloads`
/// is `max_workloads`, as clap derive names it).
#[doc(hidden)]
pub fn arg_id(field_path: &str) -> &str {
    field_path.rsplit('.').next().unwrap_or(field_path).trim()
}
