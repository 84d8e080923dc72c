#!/usr/bin/env bash
# Twin harness: the scenarios of tests/twin/ run against the reference's
# binaries and ours, what a user observes normalised and compared.
#
#   tests/harness/twin.sh REF_BIN_DIR OUR_BIN_DIR [SCENARIO...]   both builds, compared
#   tests/harness/twin.sh --record REF_BIN_DIR [SCENARIO...]      (re)write the goldens
#   tests/harness/twin.sh --check OUR_BIN_DIR [SCENARIO...]       ours against the goldens (CI)
#   options: --long (the long set too), --only-long, -j N (parallel runs,
#            default 4), --out DIR, --keep (keep run folders), -v, --list
#
# See tests/twin/README.md.
set -euo pipefail
exec python3 "$(dirname "$0")/twin/twin.py" "$@"
