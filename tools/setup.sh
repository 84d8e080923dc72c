#!/usr/bin/env bash
# Installs what building, running and testing the orchestrator needs on a
# Debian 12 machine, idempotently and without prompts: podman, runc,
# busybox-static, protoc and python3-venv (the SDK tests), mosquitto and
# mosquitto-clients (the fleet soak test, tests/harness/fleet-soak.py, starts its own
# broker; no service is started here), containerd and the CNI plugins (the
# containerd runtime; containerd is started when its socket does not answer),
# docker-registry (the containerd image pull test runs its own on a loopback
# port; the package's own service is not needed),
# a dev/test podman drop-in and the local image localhost/busybox:latest, also
# imported into containerd's `default` namespace. Safe to run again; quick
# when all is there.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: run as root (or install sudo)" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in podman runc busybox-static iproute2 protobuf-compiler python3-venv mosquitto mosquitto-clients containerd containernetworking-plugins iptables docker-registry; do
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

# containerd: started here when nothing answers on its socket (no systemd on
# CI machines); the busybox image saved once for tests to import into their
# own namespaces.
if ! ctr version >/dev/null 2>&1; then
  if [ -d /run/systemd/system ] && systemctl start containerd 2>/dev/null; then
    :
  else
    echo "setup: starting containerd (log: /var/log/ankaios-test-containerd.log)"
    $SUDO setsid nohup containerd >/var/log/ankaios-test-containerd.log 2>&1 </dev/null &
  fi
  for _ in $(seq 1 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done
  ctr version >/dev/null 2>&1 || { echo "setup: containerd does not answer on /run/containerd/containerd.sock" >&2; exit 1; }
fi
busybox_tar=/var/tmp/ankaios-busybox.tar
if [ ! -s "$busybox_tar" ]; then
  podman save -o "$busybox_tar.part" "$image" >/dev/null && mv "$busybox_tar.part" "$busybox_tar"
fi
if ! ctr -n default images check "name==$image" 2>/dev/null | grep -q complete; then
  ctr -n default images import "$busybox_tar" >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo not found: install a Rust toolchain >= 1.89 (rustup)" >&2; exit 1; }
if ! cargo nextest --version >/dev/null 2>&1; then
  echo "setup: installing cargo-nextest"
  cargo install --locked cargo-nextest </dev/null
fi
echo "setup: podman $(podman --version | awk '{print $3}'), containerd $(containerd --version | awk '{print $3}'), image $image ready"
