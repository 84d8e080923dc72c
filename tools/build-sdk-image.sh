#!/usr/bin/env bash
# Builds localhost/ankpy:latest, the image the control-interface tests run
# the official Python SDK (ankaios-sdk from PyPI, unchanged) in: a minimal
# Debian bookworm root with python3, and the SDK with its two dependencies
# under /opt/sdk (PYTHONPATH=/opt/sdk). Built once per machine; a no-op
# when the image exists. Packages are fetched on the host, never from
# inside a container.
set -euo pipefail

image=localhost/ankpy:latest
if podman image exists "$image"; then
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v python3 >/dev/null || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
if [ "${#need[@]}" -gt 0 ]; then
  echo "build-sdk-image: installing ${need[*]}"
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq "${need[@]}" </dev/null >/dev/null
fi

# The Debian mirror the host itself uses.
mirror=$(bash "$(dirname "$0")/debian-mirror.sh")

work=$(mktemp -d)
trap '$SUDO rm -rf "$work"' EXIT
rootfs=$work/rootfs

echo "build-sdk-image: debootstrap bookworm from $mirror (a few minutes, once per machine)"
$SUDO debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  echo "build-sdk-image: debootstrap failed; last lines of its log:" >&2
  tail -n 20 "$work/debootstrap.log" >&2
  exit 1
}

# Wheels for the image's python3 (bookworm: 3.11); a wheel is a zip laid out
# for site-packages, so extracting it is installing it.
echo "build-sdk-image: fetching ankaios-sdk, protobuf==6.33.5, PyYAML"
mkdir -p "$work/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  -d "$work/wheels" ankaios-sdk protobuf==6.33.5 PyYAML </dev/null
$SUDO mkdir -p "$rootfs/opt/sdk"
for whl in "$work"/wheels/*.whl; do
  $SUDO python3 -m zipfile -e "$whl" "$rootfs/opt/sdk"
done

$SUDO tar -C "$rootfs" -c . | podman import -q - "$image" >/dev/null
podman run --rm -e PYTHONPATH=/opt/sdk "$image" python3 -c 'import ankaios_sdk, yaml, google.protobuf' </dev/null || {
  podman rmi -f "$image" >/dev/null 2>&1 || true
  echo "build-sdk-image: the built image cannot import ankaios_sdk" >&2
  exit 1
}
echo "build-sdk-image: $image ready"
