#!/usr/bin/env bash
# Builds the local image localhost/ank-fleet-connector:latest from a built
# ank-fleet-connector, without a registry: a root file system holding the
# binary, the shared libraries `ldd` lists and the dynamic loader, imported
# with `podman import` (entrypoint /usr/bin/ank-fleet-connector).
#
#   bash tools/build-fleet-image.sh [BINARY]   # default target/release/ank-fleet-connector
#
# The image carries the binary's SHA-256 as the label ank.fleet.binary-sha256;
# when it equals the given binary's, nothing is done (quick to call before
# every run). IMAGE overrides the image name. Needs podman and ldd (libc-bin).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-target/release/ank-fleet-connector}
image=${IMAGE:-localhost/ank-fleet-connector:latest}
label=ank.fleet.binary-sha256

[ -f "$bin" ] || { echo "build-fleet-image: $bin not found: build it with 'cargo build --release -p ank-fleet'" >&2; exit 1; }
command -v podman >/dev/null || { echo "build-fleet-image: podman not found (bash tools/setup.sh)" >&2; exit 1; }
command -v ldd >/dev/null || { echo "build-fleet-image: ldd not found (libc-bin)" >&2; exit 1; }

sum=$(sha256sum "$bin" | awk '{print $1}')
old_id=""
if podman image exists "$image"; then
  old_id=$(podman image inspect --format '{{.Id}}' "$image")
  have=$(podman image inspect --format "{{index .Labels \"$label\"}}" "$image" 2>/dev/null || true)
  if [ "$have" = "$sum" ]; then
    echo "build-fleet-image: $image is up to date (${sum:0:12})"
    exit 0
  fi
fi

rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs/usr/bin" "$rootfs/etc" "$rootfs/tmp" "$rootfs/run/ankaios" "$rootfs/certs"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin" "$rootfs/usr/bin/ank-fleet-connector"
printf 'root:x:0:0:root:/root:/usr/bin/ank-fleet-connector\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\n' >"$rootfs/etc/group"

# Every absolute path ldd names: the libraries (`name => /path (addr)`) and
# the loader (`/lib64/ld-linux-x86-64.so.2 (addr)`). A static binary has none.
libs=$(ldd "$bin" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' | sort -u || true)
for lib in $libs; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
  # Also under the resolved path, in case the loader looks there.
  real=$(readlink -f "$lib")
  if [ "$real" != "$lib" ]; then
    mkdir -p "$rootfs$(dirname "$real")"
    cp -L "$lib" "$rootfs$real"
  fi
done

tar -C "$rootfs" -c . | podman import --quiet \
  --change 'ENTRYPOINT ["/usr/bin/ank-fleet-connector"]' \
  --change "LABEL $label=$sum" \
  - "$image" >/dev/null
new_id=$(podman image inspect --format '{{.Id}}' "$image")
# The image this one replaced is left untagged; remove it unless a container uses it.
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  podman rmi "$old_id" >/dev/null 2>&1 || true
fi
echo "build-fleet-image: built $image from $bin (${sum:0:12}; $(echo "$libs" | grep -c . || true) libraries)"
