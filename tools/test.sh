#!/usr/bin/env bash
# Runs the whole test suite: set-up (and, once per machine, the Python SDK
# test image and the systemd test image), build of the binaries the
# end-to-end tests drive and of the dev .deb the systemd test installs, unit
# + in-process + real-podman + end-to-end tests (after the offline
# dependency audit of Cargo.lock, tools/audit.py), a short fuzz run of every
# fuzz target (FUZZ_SECONDS each), then formatting and lints. Exits non-zero
# on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# A clean clone in CI never reuses incremental state; writing it would double
# the build's disk use (the debug target reaches tens of GB with it).
if [ "${CI:-}" = true ]; then
    export CARGO_INCREMENTAL=0
fi

bash tools/setup.sh
bash tools/build-sdk-image.sh
bash tools/build-systemd-image.sh
cargo build --bins
bash tools/build-deb.sh --profile dev
python3 tools/trace-requirements.py
python3 tools/audit.py
cargo nextest run --workspace --no-fail-fast
bash tools/fuzz.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
