#!/usr/bin/env bash
# Installs what building, running and testing the orchestrator needs on a
# Debian 12 machine, idempotently and without prompts: podman, runc,
# busybox-static, protoc and python3-venv (the SDK tests), mosquitto and
# mosquitto-clients (the fleet soak test, tools/fleet-soak.py, starts its own
# broker; no service is started here), a dev/test podman drop-in and the local
# image localhost/busybox:latest. Safe to run again; quick when all is there.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root (or install sudo)" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in podman runc busybox-static iproute2 protobuf-compiler python3-venv mosquitto mosquitto-clients; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq "${missing[@]}" </dev/null >/dev/null
fi

# Dev/test only: on these machines crun fails (cgroups hybrid mode) and
# podman's default ulimits cannot be raised. The agent never hard-codes
# this; on a normal host none of it is needed.
dropin=/etc/containers/containers.conf.d/50-ankaios-dev.conf
if [ ! -f "$dropin" ]; then
  echo "setup: writing $dropin"
  $SUDO mkdir -p "$(dirname "$dropin")"
  printf '%s\n' '[containers]' 'default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]' \
    '[engine]' 'runtime = "runc"' | $SUDO tee "$dropin" >/dev/null
fi

# No registry is reachable: build the busybox image from the host's binary.
image=localhost/busybox:latest
if ! podman image exists "$image"; then
  echo "setup: building $image from /bin/busybox"
  rootfs=$(mktemp -d)
  mkdir -p "$rootfs/bin"
  cp /bin/busybox "$rootfs/bin/"
  for a in sh sleep echo cat ls true false env mkfifo httpd nc; do ln -s busybox "$rootfs/bin/$a"; done
  tar -C "$rootfs" -c . | podman import - "$image" >/dev/null
  rm -rf "$rootfs"
fi

set +e
podman run --rm "$image" sh -c 'exit 3' </dev/null
rc=$?
set -e
if [ "$rc" -ne 3 ]; then
  echo "setup: podman does not work here: 'podman run --rm $image sh -c \"exit 3\"' exited $rc, expected 3" >&2
  exit 1
fi

command -v cargo >/dev/null || { echo "setup: cargo not found: install a Rust toolchain >= 1.89 (rustup)" >&2; exit 1; }
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest"
  cargo install --locked cargo-nextest </dev/null
fi
echo "setup: podman $(podman --version | awk '{print $3}'), image $image ready"
