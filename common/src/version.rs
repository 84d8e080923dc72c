//! The Ankaios version this release is compatible with, in one place: the
//! second word of every binary's `--version` line, the protocol version
//! sent in every hello (agent, commander, control interface), and the rule
//! by which a peer's hello version is accepted (same major version, as
//! Ankaios checks it, with its error text).

/// The Ankaios release whose protocol, CLI and files this release
/// implements, as a literal for `concat!`.
#[macro_export]
macro_rules! ankaios_version {
    () => {
        "1.1.0-pre"
    };
}

/// The Ankaios version we speak: sent as `protocolVersion` in hellos.
pub const ANKAIOS_VERSION: &str = ankaios_version!();

/// What `--version` prints after the binary's name: the Ankaios version
/// first (tools split the line on spaces and take the second word), then
/// our own build.
pub const VERSION_LINE: &str = concat!(ankaios_version!(), " (ank ", env!("CARGO_PKG_VERSION"), ")");

/// A peer's protocol version Ankaios refuses; its text is Ankaios' refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Unsupported protocol version '{version}'. Currently supported '{supported}'")]
pub struct UnsupportedVersion {
    pub version: String,
    /// Our major version (`major.minor` before 1.0).
    pub supported: String,
}

/// The refusal text, as the peer gets it.
impl From<UnsupportedVersion> for String {
    fn from(e: UnsupportedVersion) -> Self {
        e.to_string()
    }
}

/// Checks a peer's protocol version the way Ankaios does: a semantic
/// version with our major number; otherwise Ankaios' refusal.
pub fn check_compatibility(version: &str) -> Result<(), UnsupportedVersion> {
    let ours = semver::Version::parse(ANKAIOS_VERSION).expect("ANKAIOS_VERSION is a semantic version");
    if semver::Version::parse(version).is_ok_and(|theirs| theirs.major == ours.major) {
        return Ok(());
    }
    let supported = if ours.major > 0 { ours.major.to_string() } else { format!("{}.{}", ours.major, ours.minor) };
    Err(UnsupportedVersion { version: version.to_owned(), supported })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_same_major_is_compatible() {
        for ok in ["1.0.0", "1.0.1", "1.1.0-pre", "1.2.3+build.5", ANKAIOS_VERSION] {
            assert_eq!(check_compatibility(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn version_other_major_or_no_semver_is_refused_with_ankaios_text() {
        for bad in ["0.7.0", "2.0.0", "1", "1.0", "1.garbage", "01.0.0", "1.0.0-", "", "v1.0.0", "0.1.0"] {
            assert_eq!(
                check_compatibility(bad).map_err(String::from),
                Err(format!("Unsupported protocol version '{bad}'. Currently supported '1'")),
                "{bad}"
            );
        }
    }

    #[test]
    fn version_line_starts_with_the_ankaios_version() {
        assert_eq!(ANKAIOS_VERSION, "1.1.0-pre");
        // Ankaios' system tests take the second word of `ank-server --version`.
        let line = format!("ank-server {VERSION_LINE}");
        assert_eq!(line.split(' ').nth(1), Some(ANKAIOS_VERSION));
        assert!(VERSION_LINE.ends_with(&format!("(ank {})", env!("CARGO_PKG_VERSION"))), "{VERSION_LINE}");
        assert_eq!(check_compatibility(line.split(' ').nth(1).unwrap()), Ok(()));
    }
}
