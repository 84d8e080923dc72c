//! [`config_keys!`](crate::config_keys): the one table in which a binary
//! names each key of its config file once, with its type and the flag it
//! sits under. From it come the serde struct the file is read into (every
//! key optional) and its [`ConfigKeys`](super::ConfigKeys) impl, which
//! checks the path-or-content pairs and fills the parsed command line.
//! ```text
//! config_keys! {
//!     /// The keys of `x.conf`.
//!     pub struct XConfigFile for Cli {
//!         flags { insecure: bool, response_timeout: u64 => response_timeout_ms }
//!         pem PathBuf => tls { ca_pem + ca_pem_content }
//!         tables { retention: RetentionSection }
//!         no_flag { runtimes: Vec<String> => runtimes }
//!         own by merge_tags { labels: BTreeMap<String, String> }
//!     }
//! }
//! ```

/// Declares the keys of a config file (or of one of its tables) and where
/// each goes in the parsed command line `Target`. Sections (each optional,
/// in this order): `flags { key: T }` fills the flag of the same name,
/// `flags { key: T => a.b }` the field `a.b` (flag id `b`, as clap derive
/// names it); `pem P => f { x + x_content }` a path-or-content pair under
/// flag `x` of the flag block in field `f` (see [`crate::tls_flags`]);
/// `tables { key: Table }` a table with its own `config_keys!` for the
/// same `Target`; `no_flag { key: T => field }` a value no flag sets;
/// `own by f { key: T }` keys that `f(target, matches, values...)` merges.
/// A key's attributes (`///`, `#[serde(...)]`) go on its field, which is
/// `Option<T>`: a `deserialize_with` function returns `Option<T>`.
#[macro_export]
macro_rules! config_keys {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident for $target:ty {
            $( flags { $( $(#[$fattr:meta])* $key:ident : $ty:ty $(=> $($field:ident).+)? ),* $(,)? } )?
            $( pem $pty:ty => $pfield:ident { $( $pkey:ident + $ckey:ident ),* $(,)? } )?
            $( tables { $( $(#[$tattr:meta])* $tkey:ident : $tty:ty ),* $(,)? } )?
            $( no_flag { $( $(#[$nattr:meta])* $nkey:ident : $nty:ty => $nfield:ident ),* $(,)? } )?
            $( own by $own:path { $( $(#[$oattr:meta])* $okey:ident : $oty:ty ),* $(,)? } )?
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Default, ::serde::Deserialize)]
        $vis struct $name {
            $($( #[serde(default)] $(#[$fattr])* pub $key: Option<$ty>, )*)?
            $($( #[serde(default)] pub $pkey: Option<$pty>, #[serde(default)] pub $ckey: Option<$crate::tls::PemText>, )*)?
            $($( #[serde(default)] $(#[$tattr])* pub $tkey: Option<$tty>, )*)?
            $($( #[serde(default)] $(#[$nattr])* pub $nkey: Option<$nty>, )*)?
            $($( #[serde(default)] $(#[$oattr])* pub $okey: Option<$oty>, )*)?
        }

        impl $crate::config_file::ConfigKeys for $name {
            type Target = $target;

            fn parse(path: &str, text: &str) -> Result<(Self, Vec<String>), $crate::config_file::ConfigFileError> {
                $crate::config_file::parse_lenient(path, text)
            }

            fn or(self, other: Self) -> Self {
                Self {
                    $($( $key: self.$key.or(other.$key), )*)?
                    $($( $pkey: self.$pkey.or(other.$pkey), $ckey: self.$ckey.or(other.$ckey), )*)?
                    $($( $tkey: self.$tkey.or(other.$tkey), )*)?
                    $($( $nkey: self.$nkey.or(other.$nkey), )*)?
                    $($( $okey: self.$okey.or(other.$okey), )*)?
                }
            }

            #[allow(unused_variables)]
            fn check_pairs(&self, file: &str, prefix: &str) -> Result<(), $crate::config_file::ConfigFileError> {
                $($(
                    let key = format!("{prefix}{}", stringify!($pkey));
                    $crate::config_file::check_path_or_content(file, &key, self.$pkey.is_some(), self.$ckey.is_some())?;
                )*)?
                $($(
                    if let Some(table) = &self.$tkey {
                        let prefix = format!("{prefix}{}.", stringify!($tkey));
                        $crate::config_file::ConfigKeys::check_pairs(table, file, &prefix)?;
                    }
                )*)?
                Ok(())
            }

            #[allow(unused_variables)]
            fn merge_into(self, target: &mut $target, m: &$crate::config_file::ArgMatches) {
                $($(
                    $crate::config_file::fill(
                        &mut $crate::config_keys!(@place target, $key $(, $($field).+)?),
                        self.$key,
                        m,
                        $crate::config_keys!(@id $key $(, $($field).+)?),
                    );
                )*)?
                $($(
                    let slots = (&mut target.$pfield.$pkey, &mut target.$pfield.$ckey);
                    $crate::config_file::fill_pem(slots, (self.$pkey, self.$ckey), m, stringify!($pkey));
                )*)?
                $($(
                    if let Some(table) = self.$tkey {
                        $crate::config_file::ConfigKeys::merge_into(table, target, m);
                    }
                )*)?
                $($(
                    if let Some(value) = self.$nkey {
                        $crate::config_file::Slot::put(&mut target.$nfield, value);
                    }
                )*)?
                $( $own(target, m, $(self.$okey),*); )?
            }
        }
    };

    // Where a key goes and the id of its flag: the field after `=>`, else
    // the key's namesake.
    (@place $target:ident, $key:ident) => { $target.$key };
    (@place $target:ident, $key:ident, $($field:ident).+) => { $target.$($field).+ };
    (@id $key:ident) => { stringify!($key) };
    (@id $key:ident, $($field:ident).+) => { $crate::config_file::arg_id(stringify!($($field).+)) };
}
