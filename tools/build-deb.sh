#!/usr/bin/env bash
# Builds the Debian package `ank` with cargo-deb (metadata in
# packaging/Cargo.toml): the four binaries (ank, ank-server, ank-agent,
# ank-certs), the systemd units, default configs and maintainer scripts of
# packaging/, the man pages (ank-docgen, gzipped) and the shell completions
# (ank completion). Installs the pinned cargo-deb first if it is missing.
# Runs lintian on a release package where lintian is installed. Prints the
# path of the .deb and its Installed-Size.
#
#   tools/build-deb.sh [--profile release|dev]     (default: release)
#
# release: only the packaged crates, optimized. dev: the binaries of the
# workspace's `cargo build --bins` (what tools/test.sh builds for the tests
# anyway, so no extra compiling), for tests/tests/e2e_systemd.rs.
# Honours CARGO_TARGET_DIR; the .deb lands in <target>/debian/<profile>/.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_DEB_VERSION=3.8.0

usage() { echo "usage: tools/build-deb.sh [--profile release|dev]" >&2; exit 2; }
profile=release
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) [ $# -ge 2 ] || usage; profile=$2; shift 2 ;;
    --profile=*) profile=${1#--profile=}; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-deb: unknown argument '$1'" >&2; usage ;;
  esac
done

if [ "$(cargo deb --version 2>/dev/null | awk '{print $2}')" != "$CARGO_DEB_VERSION" ]; then
  echo "build-deb: installing cargo-deb $CARGO_DEB_VERSION"
  cargo install --locked cargo-deb --version "$CARGO_DEB_VERSION" </dev/null
fi

target_dir=$(cargo metadata --format-version 1 --no-deps </dev/null \
  | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
[ -d "$(dirname "$target_dir")" ] || { echo "build-deb: cannot tell the target folder from cargo metadata" >&2; exit 1; }
case "$profile" in
  release)
    echo "build-deb: building the packaged binaries (release profile)"
    cargo build --release -p ank -p ank-server -p ank-agent -p ank-certs -p ank-docgen </dev/null
    bins=$target_dir/release ;;
  dev)
    echo "build-deb: building the workspace binaries (dev profile, as tools/test.sh does)"
    cargo build --bins </dev/null
    bins=$target_dir/debug ;;
  *) echo "build-deb: unknown profile '$profile' (release or dev)" >&2; usage ;;
esac

# The payload cargo-deb reads as target/release/... (packaging/Cargo.toml):
# one staging folder per profile, so that both go through the same path.
stage=$target_dir/deb-stage/$profile
rm -rf "$stage"
mkdir -p "$stage/release/pkg/man" "$stage/release/pkg/completions"
for b in ank ank-server ank-agent ank-certs; do
  [ -x "$bins/$b" ] || { echo "build-deb: $bins/$b was not built" >&2; exit 1; }
  cp "$bins/$b" "$stage/release/"
done
"$bins/ank-docgen" "$stage/release/pkg/man" >/dev/null
for page in ank.1 ank-server.8 ank-agent.8; do
  [ -s "$stage/release/pkg/man/$page" ] || { echo "build-deb: ank-docgen wrote no $page" >&2; exit 1; }
done
gzip -9n "$stage/release/pkg/man/"*
"$bins/ank" completion bash >"$stage/release/pkg/completions/ank.bash"
"$bins/ank" completion zsh >"$stage/release/pkg/completions/_ank"
"$bins/ank" completion fish >"$stage/release/pkg/completions/ank.fish"

echo "build-deb: packaging"
out=$target_dir/debian/$profile
rm -rf "$out"
mkdir -p "$out"
fast=()
[ "$profile" = dev ] && fast=(--fast)  # a test package: quick over small
CARGO_TARGET_DIR=$stage cargo deb -p ank-packaging --no-build --strip "${fast[@]}" -o "$out/" </dev/null >/dev/null
deb=$(find "$out" -maxdepth 1 -name "*.deb" | head -n 1)
[ -n "$deb" ] || { echo "build-deb: cargo deb wrote no .deb into $out" >&2; exit 1; }
if [ "$profile" = release ] && command -v lintian >/dev/null; then
  echo "build-deb: lintian (fails on errors; overrides in packaging/debian/lintian-overrides)"
  lintian --fail-on error "$deb"
fi
echo "build-deb: $deb"
echo "build-deb: Installed-Size: $(dpkg-deb -f "$deb" Installed-Size) KiB"
