#!/usr/bin/env bash
# Measures how long the server takes to mark an agent's workloads
# AgentDisconnected after its link is cut silently, with the default
# heartbeat settings (or HEARTBEAT_ARGS for both daemons). Two test hosts in
# network namespaces made here (server + ank in one, agent in the other,
# joined by a veth pair in 10.214.0.0/30); the cut sets the agent's end of
# the link down, so the server's side gets no FIN and no RST. RUNS cuts
# (default 10), each healed before the next; prints every figure and the
# median. Needs root, iproute2 and podman (`bash tools/setup.sh`).
# PROFILE=debug uses the debug binaries (the figure is set by the heartbeat
# timers, not by the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-10}
heartbeat_args=${HEARTBEAT_ARGS:-}
profile=${PROFILE:-release}
if [ "$profile" = release ]; then cargo build --release --bins -q; else cargo build --bins -q; fi
bin=$PWD/target/$profile
tag=$$
srv=ankcut-$tag-srv
agt=ankcut-$tag-agt
agent=cutbench_$tag
url=http://10.214.0.1:25551
work=$(mktemp -d)
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ids=$(podman ps -aq --filter "label=agent=$agent")
  [ -z "$ids" ] || podman rm -f -t 0 $ids >/dev/null
  ip netns del "$srv" 2>/dev/null || true
  ip netns del "$agt" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for ns in "$srv" "$agt"; do
  ip netns add "$ns"
  ip -n "$ns" link set lo up
done
ip -n "$srv" link add "cs$tag" type veth peer name "ca$tag"
ip -n "$srv" link set "ca$tag" netns "$agt"
ip -n "$srv" addr add 10.214.0.1/30 dev "cs$tag"
ip -n "$agt" addr add 10.214.0.2/30 dev "ca$tag"
ip -n "$srv" link set "cs$tag" up
ip -n "$agt" link set "ca$tag" up

on_srv() { nsenter --net="/var/run/netns/$srv" "$@"; }
ank() { on_srv "$bin/ank" --insecure --server-url "$url" "$@"; }

# shellcheck disable=SC2086
nsenter --net="/var/run/netns/$srv" "$bin/ank-server" --insecure --address 10.214.0.1:25551 $heartbeat_args 2>"$work/server.log" &
pids+=($!)
# shellcheck disable=SC2086
nsenter --net="/var/run/netns/$agt" "$bin/ank-agent" --insecure --name "$agent" --server-url "$url" --run-folder "$work/run" $heartbeat_args \
  2>"$work/agent.log" &
pids+=($!)

wait_for() { # PATTERN: until `ank get workloads` prints it
  for _ in $(seq 600); do
    ank get workloads 2>/dev/null | grep -q "$1" && return 0
    sleep 0.05
  done
  echo "cut-bench: '$1' not seen within 30 s" >&2
  exit 1
}

for _ in $(seq 100); do ank get agents 2>/dev/null | grep -q "$agent" && break; sleep 0.1; done
printf 'apiVersion: v1\nworkloads:\n  cut:\n    runtime: podman\n    agent: %s\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [sleep, "100000"]\n' \
  "$agent" | ank apply --no-wait - >/dev/null
wait_for 'Running(Ok)'

figures=()
for i in $(seq "$runs"); do
  ip -n "$agt" link set "ca$tag" down
  start=$(date +%s.%N)
  while ! ank get workloads 2>/dev/null | grep -q AgentDisconnected; do :; done
  end=$(date +%s.%N)
  figure=$(python3 -c "print(f'{$end - $start:.3f}')")
  figures+=("$figure")
  echo "cut $i: AgentDisconnected after $figure s"
  ip -n "$agt" link set "ca$tag" up
  wait_for 'Running(Ok)'
done
printf '%s\n' "${figures[@]}" | python3 -c "import statistics,sys; v=[float(l) for l in sys.stdin]; print(f'median of {len(v)}: {statistics.median(v):.3f} s (min {min(v):.3f}, max {max(v):.3f})')"
