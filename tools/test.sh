#!/usr/bin/env bash
# Runs the whole test suite: set-up (and, once per machine, the Python SDK
# test image), build of the binaries the end-to-end tests drive, unit +
# in-process + real-podman + end-to-end tests, a short fuzz run of every
# fuzz target (FUZZ_SECONDS each), then formatting and lints. Exits non-zero
# on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
bash tools/build-sdk-image.sh
cargo build --bins
python3 tools/trace-requirements.py
cargo nextest run --workspace --no-fail-fast
bash tools/fuzz.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
