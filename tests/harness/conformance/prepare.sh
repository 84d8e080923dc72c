#!/usr/bin/env bash
# Prepares Eclipse Ankaios' own system-test suites (Robot Framework, tests/stests of the
# Ankaios repository) to run offline against any build of ank-server, ank-agent and ank.
# usage: tests/harness/conformance/prepare.sh [--dry-run] ANKAIOS_SOURCE WORKDIR
#   ANKAIOS_SOURCE: a git directory (bare or a checkout) of the Ankaios repository, or an
#                   exported source tree of it
#   WORKDIR:        a scratch folder outside the project, kept between runs
#   --dry-run:      check the arguments and print what would be done, changing nothing
# Needs: podman with localhost/busybox:latest and localhost/ankpy:latest (tools/setup.sh
# and tools/build-sdk-image.sh make them), the package registries (apt, PyPI) the first
# time, and CONTROL_INTERFACE_TESTER=PATH of Ankaios' control_interface_tester binary unless
# the image localhost/control_interface_tester:latest exists. Re-running is quick. See tests/harness/conformance/README.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
usage="usage: prepare.sh [--dry-run] ANKAIOS_SOURCE WORKDIR"
src=${1:?$usage}
work=${2:?$usage}
commit=${ANKAIOS_COMMIT:-084dcc0a0d72c9585e507becd64c258b21c0cd70}
export DEBIAN_FRONTEND=noninteractive

# Runs a command, or in dry mode prints it.
step() {
  if [ "$dry" = 1 ]; then printf '+'; printf ' %q' "$@"; printf '\n'; else "$@"; fi
}

[ -e "$src" ] || { echo "prepare: '$src' does not exist" >&2; exit 1; }
if [ "$dry" = 1 ]; then
  case "$work" in /*) ;; *) work="$PWD/$work" ;; esac
else
  mkdir -p "$work"; work=$(cd "$work" && pwd)
fi

need=()
for pkg in protobuf-compiler python3-venv openssl; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
if [ ${#need[@]} -gt 0 ]; then
  step apt-get update -qq </dev/null
  step apt-get install -y -qq "${need[@]}" </dev/null >/dev/null
fi
for img in localhost/busybox:latest localhost/ankpy:latest; do
  if ! podman image exists "$img"; then
    echo "prepare: missing $img (run tools/setup.sh and tools/build-sdk-image.sh first)" >&2
    [ "$dry" = 1 ] || exit 1
  fi
done

# 1. the Ankaios source at the pinned commit
if [ ! -f "$work/ankaios/Cargo.toml" ]; then
  if [ -f "$src/Cargo.toml" ]; then
    echo "prepare: copying the source tree $src"
    step rm -rf "$work/ankaios"
    step mkdir -p "$work/ankaios"
    step cp -a "$src/." "$work/ankaios/"
  else
    abs=$(cd "$src" && pwd); gd="$abs"
    [ -d "$abs/.git" ] && gd="$abs/.git"
    git --git-dir="$gd" rev-parse -q --verify "$commit^{commit}" >/dev/null \
      || { echo "prepare: $src holds no commit $commit (fetch the repository again, or set ANKAIOS_COMMIT)" >&2; exit 1; }
    echo "prepare: exporting commit $commit of $gd"
    step rm -rf "$work/ankaios"
    step mkdir -p "$work/ankaios"
    if [ "$dry" = 1 ]; then echo "+ git --git-dir=$gd archive $commit | tar -x -C $work/ankaios"
    else git --git-dir="$gd" archive "$commit" | tar -x -C "$work/ankaios"; fi
  fi
fi

# 2. the suites, with images pointed at local substitutes
step rm -rf "$work/suite"
step mkdir -p "$work/suite/tools" "$work/suite/target"
step cp -a "$work/ankaios/tests" "$work/suite/tests"
step cp -a "$work/ankaios/tools/certs" "$work/suite/tools/certs"
step cp "$here/lib/setup_robot_tests.sh" "$here/lib/control_interface_workload_hash.sh" "$work/suite/tools/"
step python3 "$here/lib/repoint.py" "$work/suite/tests"

# 3. Robot Framework
if [ ! -x "$work/venv/bin/robot" ]; then
  step python3 -m venv "$work/venv"
  step "$work/venv/bin/pip" install -q robotframework PyYAML
fi

# 4. local images
img="$work/images"
step rm -rf "$img"
step cp -a "$here/images" "$img"
step podman build -q -t localhost/busybox-path:latest "$img/busybox-path"
step cp "$work/ankaios/tools/sleep-container/sleepy.sh" "$img/sleepy/"
step podman build -q -t localhost/sleepy:latest "$img/sleepy"
if ! podman image exists localhost/nginx:latest; then
  # Debian's nginx, unpacked into an image (no registry is reachable)
  if [ "$dry" = 1 ]; then echo "+ (cd $img/nginx && apt-get download nginx nginx-common), unpacked into $img/nginx/root"
  else
    (cd "$img/nginx" && apt-get download -qq nginx nginx-common </dev/null >/dev/null)
    mkdir -p "$img/nginx/root"
    for d in "$img"/nginx/*.deb; do dpkg-deb -x "$d" "$img/nginx/root"; done
    rm -rf "$img"/nginx/root/{lib,etc/init.d,etc/logrotate.d,etc/ufw,usr/share/doc,usr/share/man}
  fi
  step podman build -q -t localhost/nginx:latest "$img/nginx"
fi
if ! podman image exists localhost/control_interface_tester:latest; then
  # The suites' control-interface client is Ankaios' own program. This project builds no
  # Ankaios code: it packages a binary the user gives (CONTROL_INTERFACE_TESTER=PATH).
  tester=${CONTROL_INTERFACE_TESTER:-}
  if [ -z "$tester" ] || [ ! -x "$tester" ]; then
    echo "prepare: localhost/control_interface_tester:latest is missing: set CONTROL_INTERFACE_TESTER to a built control_interface_tester binary of the same Ankaios version (the control-interface suites need it)" >&2
    exit 1
  fi
  step cp "$tester" "$img/control_interface_tester/control_interface_tester"
  step podman build -q -t localhost/control_interface_tester:latest "$img/control_interface_tester"
fi
if [ "$dry" = 1 ]; then echo "prepare: dry run, nothing changed"
else echo "prepare: ready in $work (run: tests/harness/conformance/run.sh $work BIN_DIR [SUITE...])"; fi
