#!/usr/bin/env bash
# The cost of the agent's process watch (a pidfd on each running container's
# main process and conmon, see docs/agent.md#dead-containers-podman-still-lists-as-running):
# the agent's open fds (pidfds among them), RSS and idle CPU with N running
# podman workloads, and, for comparison with the alternative design, the time
# of one `podman ps -a --sync` of those N containers (median of 5).
#
# Usage: bash tools/ghost-bench.sh N [idle seconds] [agent binary]
# (server and CLI from target/debug; the agent binary defaults to it too:
# pass an agent built without the watch to compare).
set -euo pipefail
N=${1:?number of workloads}
IDLE=${2:-60}
DIR=$(cd "$(dirname "$0")/.." && pwd)
AGENT_BIN=${3:-$DIR/target/debug/ank-agent}
SERVER_BIN=$DIR/target/debug/ank-server
ANK=$DIR/target/debug/ank
NAME=ghostbench_$$
PORT=$((20000 + $$ % 20000))
URL=http://127.0.0.1:$PORT
RUN=$(mktemp -d)
ank() { "$ANK" --insecure --server-url "$URL" "$@"; }
cleanup() {
  ank delete workload $(seq -f 'w%g' 0 $((N - 1))) >/dev/null 2>&1 || true
  for _ in $(seq 1 100); do
    [ -z "$(podman ps -aq --filter label=agent=$NAME)" ] && break
    sleep 0.3
  done
  kill "$AGENT" "$SERVER" 2>/dev/null || true
  ids=$(podman ps -aq --filter label=agent=$NAME)
  [ -n "$ids" ] && podman rm -f -t 0 $ids >/dev/null 2>&1 || true
  rm -rf "$RUN"
}
"$SERVER_BIN" --insecure --address 127.0.0.1:$PORT --run-folder "$RUN" 2>/dev/null &
SERVER=$!
"$AGENT_BIN" --insecure --name $NAME --server-url "$URL" --run-folder "$RUN" 2>/dev/null &
AGENT=$!
trap cleanup EXIT
sleep 1
{
  echo "apiVersion: v1"
  echo "workloads:"
  for i in $(seq 0 $((N - 1))); do
    printf '  w%s:\n    runtime: podman\n    agent: %s\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: ["sleep", "100000"]\n' "$i" "$NAME"
  done
} | ank apply - >/dev/null
for _ in $(seq 1 600); do
  [ "$(ank get workloads 2>/dev/null | grep -c 'Running(Ok)')" -ge "$N" ] && break
  sleep 0.5
done
sleep 5
cpu() { awk '{print $14 + $15}' "/proc/$AGENT/stat"; }
fds=$(ls /proc/$AGENT/fd | wc -l)
pidfds=$(for f in /proc/$AGENT/fd/*; do readlink "$f"; done 2>/dev/null | grep -c pidfd || true)
rss=$(awk '/VmRSS/{print $2}' /proc/$AGENT/status)
c0=$(cpu)
sleep "$IDLE"
c1=$(cpu)
ticks=$(getconf CLK_TCK)
pct=$(awk -v d=$((c1 - c0)) -v t="$ticks" -v s="$IDLE" 'BEGIN{printf "%.2f", d / t / s * 100}')
times=()
for _ in 1 2 3 4 5; do
  s=$(date +%s%N)
  podman ps -a --sync --filter label=agent=$NAME >/dev/null
  times+=($(( ($(date +%s%N) - s) / 1000000 )))
done
sync_ms=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
echo "workloads=$N running=$(ank get workloads | grep -c 'Running(Ok)') agent_fds=$fds pidfds=$pidfds agent_rss_kb=$rss idle_cpu_pct=$pct (over ${IDLE}s) podman_ps_sync_ms=$sync_ms (median of 5: ${times[*]})"
