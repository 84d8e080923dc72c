#!/usr/bin/env bash
# Measures the control interface end to end on real podman: builds the
# release binaries, starts ank-server and one ank-agent (own port and run
# folder), applies BENCH_WORKLOADS (default 10) busybox workloads with
# control-interface access, then runs `ank-ci-bench latency` on the first
# one's pipes and `ank-ci-bench events` on all of them, and tears it all
# down again (also on failure).
#
# Environment: BENCH_AGENT (agent_A), BENCH_PORT (25571), BENCH_WORKLOADS
# (10), BENCH_REQUESTS (1000), BENCH_CHANGES (100), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

agent=${BENCH_AGENT:-agent_A}
port=${BENCH_PORT:-25571}
count=${BENCH_WORKLOADS:-10}
requests=${BENCH_REQUESTS:-1000}
changes=${BENCH_CHANGES:-100}
url=http://127.0.0.1:$port
bin=${CARGO_TARGET_DIR:-target}/release

cargo build --release -p ank-server -p ank-agent -p ank -p ank-ci-bench </dev/null

# The agent removes containers of its name that the server does not know.
if [ -n "$(podman ps -a -q --filter "label=agent=$agent")" ]; then
  echo "ci-bench: containers of agent '$agent' exist already (another run?); set BENCH_AGENT" >&2
  exit 1
fi

work=$(mktemp -d)
run_folder=$work/run
names=()
for i in $(seq 0 $((count - 1))); do names+=("cibench-$i"); done
ank() { "$bin/ank" --insecure --server-url "$url" "$@" </dev/null; }

server=""
agent_pid=""
cleanup() {
  if [ -n "$server" ]; then
    ank delete workload "${names[@]}" >/dev/null 2>&1 || true
  fi
  for pid in $agent_pid $server; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  podman rm -f -t 0 --filter "label=agent=$agent" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "ci-bench: $*" >&2
  tail -n 20 "$work/server.log" "$work/agent.log" >&2 || true
  exit 1
}

"$bin/ank-server" --insecure --address "127.0.0.1:$port" >"$work/server.log" 2>&1 </dev/null &
server=$!
"$bin/ank-agent" --insecure --name "$agent" --server-url "$url" --run-folder "$run_folder" \
  >"$work/agent.log" 2>&1 </dev/null &
agent_pid=$!
for _ in $(seq 1 100); do
  ank get agents 2>/dev/null | grep -q "$agent" && break
  sleep 0.1
done
ank get agents 2>/dev/null | grep -q "$agent" || fail "agent '$agent' did not connect"

{
  echo "apiVersion: v1"
  echo "workloads:"
  for name in "${names[@]}"; do
    cat <<EOF
  $name:
    runtime: podman
    agent: $agent
    restartPolicy: NEVER
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: ["desiredState"]
        - type: StateRule
          operation: Read
          filterMasks: ["workloadStates"]
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sleep", "3600"]
EOF
  done
} >"$work/manifest.yaml"

start=$(date +%s%N)
ank apply "$work/manifest.yaml" >/dev/null || fail "apply failed"
running=$(ank get workloads | grep -c 'cibench-.*Running(Ok)' || true)
[ "$running" -eq "$count" ] || fail "$running of $count workloads are Running(Ok)"
echo "ci-bench: $count workloads running after $((($(date +%s%N) - start) / 1000000)) ms"

dirs=()
for name in "${names[@]}"; do
  dir=$(echo "$run_folder/${agent}_io/$name".*/control_interface)
  [ -p "$dir/input" ] && [ -p "$dir/output" ] || fail "no pipes for $name ($dir)"
  dirs+=("$dir")
done

"$bin/ank-ci-bench" latency --pipes "${dirs[0]}" --requests "$requests"
"$bin/ank-ci-bench" events --pipes "$(IFS=,; echo "${dirs[*]}")" --changes "$changes"
