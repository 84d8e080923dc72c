#!/usr/bin/env bash
# Runs Eclipse Ankaios' system tests against the ank-server, ank-agent and ank in BIN_DIR.
# usage: tests/harness/conformance/run.sh [--dry-run] WORKDIR BIN_DIR [SUITE...]
#   WORKDIR: the folder tests/harness/conformance/prepare.sh prepared
#   SUITE:   a path under tests/stests (workloads/list_workloads.robot) or a substring of
#            one; default: every suite below
#   --dry-run: check WORKDIR and BIN_DIR and print the suites and commands, running nothing
# Each suite runs alone under a time limit. Before each, podman is cleaned (podman rm -af):
# nothing else may use podman meanwhile. Results: WORKDIR/results/<suite>/ (log.html,
# output.xml, console.txt). The last line is "N passed, N failed".
set -uo pipefail
dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
usage="usage: run.sh [--dry-run] WORKDIR BIN_DIR [SUITE...]"
work=$(cd "${1:?$usage}" && pwd) || exit 1
bin=$(cd "${2:?$usage}" && pwd) || exit 1
shift 2
SUITES="
agents/list_agents.robot 600
agents/tmpdir_default_run_folder.robot 600
agents/update_agents.robot 600
configs/config_file.robot 900
configs/work_with_configs.robot 600
manifests/apply_manifests.robot 1200
mtls/mtls_communication.robot 900
events/get_events.robot 1200
workloads/add_update_invalid_runtime.robot 600
workloads/create_workload_podman.robot 600
workloads/create_workload_podman_kube.robot 600
workloads/delete_workload_podman.robot 600
workloads/delete_workload_podman_kube.robot 600
workloads/device_restart_with_dependencies.robot 900
workloads/interworkload_dependencies.robot 900
workloads/list_workloads.robot 600
workloads/reject_state_with_cyclic_dependencies.robot 600
workloads/restart_handling_podman.robot 600
workloads/restart_handling_podman_kube.robot 600
workloads/retry_creation_of_workload_podman.robot 900
workloads/state_operations_with_field_mask.robot 900
workloads/update_workload_podman.robot 900
workloads/workload_configs_podman.robot 900
workloads/workload_configs_podman_kube.robot 600
workloads/workload_files.robot 900
workloads/workload_logs.robot 600
control_interface/authorization.robot 1500
control_interface/control_interface.robot 1200
control_interface/test_events.robot 1200
"
missing=0
for b in ank ank-server ank-agent; do
  [ -x "$bin/$b" ] || { echo "run: '$bin/$b' is missing" >&2; missing=1; }
done
for f in suite/tools/setup_robot_tests.sh venv/bin/robot; do
  [ -e "$work/$f" ] || { echo "run: '$work/$f' is missing: run tests/harness/conformance/prepare.sh first" >&2; missing=1; }
done
[ "$missing" = 0 ] || [ "$dry" = 1 ] || exit 1
export ANK_BIN_DIR="$bin" PATH="$work/venv/bin:$PATH"
total_p=0; total_f=0; chosen=0
while read -r s t; do
  [ -z "$s" ] && continue
  if [ $# -gt 0 ]; then hit=0; for want in "$@"; do case "$s" in *"$want"*) hit=1;; esac; done; [ $hit = 1 ] || continue; fi
  chosen=$((chosen+1))
  name=$(basename "$s" .robot); out="$work/results/$name"
  if [ "$dry" = 1 ]; then
    echo "$name: tools/setup_robot_tests.sh, then timeout $t robot --pythonpath tests --exclude containerd -d $out tests/stests/$s"
    continue
  fi
  rm -rf "$out"; mkdir -p "$out"
  if ! (cd "$work/suite" && ./tools/setup_robot_tests.sh) >"$out/setup.log" 2>&1; then
    echo "$name: set-up failed (see $out/setup.log)"; total_f=$((total_f+1)); continue
  fi
  (cd "$work/suite" && timeout -k 60 "$t" robot --pythonpath tests --loglevel TRACE:INFO --exclude containerd -d "$out" "tests/stests/$s") >"$out/console.txt" 2>&1
  line=$(grep -E "^[0-9]+ tests?, [0-9]+ passed, [0-9]+ failed" "$out/console.txt" | tail -1)
  p=$(echo "$line" | awk '{print $3}'); f=$(echo "$line" | awk '{print $5}')
  total_p=$((total_p+${p:-0})); total_f=$((total_f+${f:-1}))
  printf '%-40s %s\n' "$name" "${line:-no result (timed out?)}"
  grep -E "\| FAIL \|" "$out/console.txt" | sed 's/^/    FAIL: /; s/ *| FAIL |.*//' | sort -u
done <<< "$SUITES"
if [ "$chosen" = 0 ]; then echo "run: no suite matches: $*" >&2; exit 2; fi
if [ "$dry" = 1 ]; then echo "run: dry run, $chosen suites, nothing ran"; exit 0; fi
echo "$total_p passed, $total_f failed"
