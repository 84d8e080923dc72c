//! The Debian package `ank` (metadata in this crate's Cargo.toml, built by
//! `tools/build-deb.sh`): the crate builds nothing into it; its tests check
//! the packaged files against the binaries they are for. The default
//! configs must be accepted by each binary's own config reader, the units
//! must start the binaries with those configs and give them the folders the
//! configs name, and postinst must make the certificates the configs use.

#[cfg(test)]
mod tests;
