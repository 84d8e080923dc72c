#!/usr/bin/env bash
# Runs every cargo-fuzz target under fuzz/ for a short time (FUZZ_SECONDS,
# default 10 s each), starting from the committed seeds in
# fuzz/seeds/<target>/ and the local corpus in fuzz/corpus/<target>/ (not
# in git). Installs cargo-fuzz first if it is missing. Exits non-zero when
# a target crashes; libFuzzer then names the input it saved under
# fuzz/artifacts/<target>/.
#
# cargo-fuzz needs nightly compiler flags: RUSTC_BOOTSTRAP=1 is set for the
# fuzz command only, never for the product build. The sanitizer is off by
# default (FUZZ_SANITIZER=address turns ASan on): the code under test is
# safe Rust, so panics, debug assertions (on) and the target's own
# assertions are the oracles, and an uninstrumented build is faster.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-10}
sanitizer=${FUZZ_SANITIZER:-none}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install --locked cargo-fuzz </dev/null
fi

targets=$(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list </dev/null)
for target in $targets; do
  mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
  echo "fuzz: $target for ${seconds} s"
  RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz --sanitizer "$sanitizer" --debug-assertions "$target" \
    "fuzz/corpus/$target" "fuzz/seeds/$target" -- -max_total_time="$seconds" -timeout=10 -verbosity=0 -print_final_stats=1 \
    </dev/null
done
