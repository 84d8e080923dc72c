#!/usr/bin/env bash
# Refreshes the advisory snapshot that tools/audit.py checks Cargo.lock
# against (tools/audit/advisories.json): reads the RustSec advisory
# database from a checkout given as the argument, or clones it (depth 1)
# when none is given, and rewrites the snapshot with the database's commit
# and date. Commit the result; CI never fetches it.
#
#   tools/audit-refresh.sh [ADVISORY_DB_CHECKOUT_OR_GIT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

src=${1:-}
tmp=""
cleanup() { [ -n "$tmp" ] && rm -rf "$tmp"; }
trap cleanup EXIT
if [ -z "$src" ]; then
  tmp=$(mktemp -d)
  git clone --quiet --depth 1 https://github.com/rustsec/advisory-db "$tmp/db"
  src="$tmp/db"
fi
if [ -d "$src/crates" ]; then
  dir="$src"
  commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
  date=$(git -C "$src" log -1 --format=%cs 2>/dev/null || echo unknown)
else
  # A bare repository (a mirror): check its HEAD out into a temporary folder.
  tmp=${tmp:-$(mktemp -d)}
  mkdir -p "$tmp/tree"
  git --git-dir="$src" archive HEAD crates | tar -x -C "$tmp/tree"
  dir="$tmp/tree"
  commit=$(git --git-dir="$src" rev-parse HEAD)
  date=$(git --git-dir="$src" log -1 --format=%cs)
fi
python3 tools/audit.py --refresh "$dir" "$commit" "$date"
python3 tools/audit.py || true
