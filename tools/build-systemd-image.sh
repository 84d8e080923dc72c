#!/usr/bin/env bash
# Builds localhost/ank-systemd:latest, the image tests/tests/e2e_systemd.rs
# boots systemd in (as PID 1, `podman run --systemd=always --privileged`) to
# install the .deb and drive its units: Debian bookworm with systemd, dbus,
# podman, runc, netavark, busybox-static and the package's other
# dependencies, so `dpkg -i` works without apt inside the container.
# Built once per machine; a no-op when the image exists. Packages are
# fetched on the host (debootstrap), never from inside a container.
#
# Test-image settings, written into the image only (the .deb never writes
# them): podman uses runc with low ulimits (like tools/setup.sh does on the
# host, for these build machines) and the vfs storage driver (overlay
# cannot be stacked on the container's own overlay root).
set -euo pipefail

image=localhost/ank-systemd:latest
if podman image exists "$image"; then
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

if ! command -v debootstrap >/dev/null; then
  echo "build-systemd-image: installing debootstrap"
  $SUDO apt-get update -qq </dev/null
  $SUDO apt-get install -y -qq debootstrap </dev/null >/dev/null
fi

# The Debian mirror the host itself uses.
mirror=$(bash "$(dirname "$0")/debian-mirror.sh")

work=$(mktemp -d)
trap '$SUDO rm -rf "$work"' EXIT
rootfs=$work/rootfs

packages=(
  systemd systemd-sysv dbus
  podman conmon runc netavark aardvark-dns iptables golang-github-containers-common
  busybox-static ca-certificates iproute2 procps
)
echo "build-systemd-image: debootstrap bookworm from $mirror (a few minutes, once per machine)"
$SUDO debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" bookworm "$rootfs" "$mirror" \
  >"$work/debootstrap.log" 2>&1 || {
  echo "build-systemd-image: debootstrap failed; last lines of its log:" >&2
  tail -n 20 "$work/debootstrap.log" >&2
  exit 1
}

$SUDO mkdir -p "$rootfs/etc/containers/containers.conf.d"
printf '%s\n' '# ank-systemd test image only: runc (crun fails on these build machines)' \
  '# and ulimits that can be set here.' \
  '[containers]' 'default_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]' \
  '[engine]' 'runtime = "runc"' \
  | $SUDO tee "$rootfs/etc/containers/containers.conf.d/50-ankaios-test.conf" >/dev/null
printf '%s\n' '# ank-systemd test image only: overlay cannot sit on the container'"'"'s overlay root.' \
  '[storage]' 'driver = "vfs"' 'runroot = "/run/containers/storage"' 'graphroot = "/var/lib/containers/storage"' \
  | $SUDO tee "$rootfs/etc/containers/storage.conf" >/dev/null

# Boot to multi-user without what a container has no use for.
$SUDO chroot "$rootfs" systemctl set-default multi-user.target >/dev/null
$SUDO chroot "$rootfs" systemctl mask getty@tty1.service serial-getty@.service \
  systemd-remount-fs.service sys-kernel-debug.mount >/dev/null 2>&1 || true
$SUDO truncate -s 0 "$rootfs/etc/machine-id"
$SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*

$SUDO tar -C "$rootfs" -c . | podman import -q \
  --change 'CMD ["/lib/systemd/systemd"]' --change 'STOPSIGNAL=SIGRTMIN+3' - "$image" >/dev/null
for tool in systemctl journalctl podman runc dpkg deb-systemd-helper busybox; do
  podman run --rm --entrypoint '' "$image" sh -c "command -v $tool >/dev/null" </dev/null || {
    podman rmi -f "$image" >/dev/null 2>&1 || true
    echo "build-systemd-image: the built image lacks $tool" >&2
    exit 1
  }
done
echo "build-systemd-image: $image ready"
