#!/usr/bin/env bash
# Measures the memory of the agent's whole process tree: the PSS (from
# /proc/<pid>/smaps_rollup) summed over ank-agent and every process below
# it, idle with no workload and again with 20 busybox workloads running
# (median of 5 samples 2 s apart, each after 10 s idle). Lists the tree and
# the agent's children (`pgrep -P`, with their command lines; a podman ps
# of the 30 s reconcile may show up), then deletes the workloads and removes
# any container left of agent `pss_probe`. BIN names the folder of the
# binaries to measure (default: target/release, built here); PORT the
# server's port (default 25771). Needs podman and `localhost/busybox:latest`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${BIN:-}" ]; then
    cargo build --release -q -p ank-agent -p ank-server -p ank
    BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
fi
addr=127.0.0.1:${PORT:-25771}
url=http://$addr
agent=pss_probe
run=$(mktemp -d /tmp/agent-pss.XXXXXX)

ank() { "$BIN/ank" --insecure --server-url "$url" "$@"; }
tree() { echo "$1"; for c in $(pgrep -P "$1" || true); do tree "$c"; done; }
pss() { awk '/^Pss:/{print $2}' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
pss_tree() { local sum=0 p; for p in $(tree "$1"); do sum=$((sum + $(pss "$p"))); done; echo "$sum"; }
median_pss() {
    local samples=() i
    for i in 1 2 3 4 5; do samples+=("$(pss_tree "$1")"); sleep 2; done
    printf '%s\n' "${samples[@]}" | sort -n | sed -n 3p
}
show_tree() {
    local p
    for p in $(tree "$1"); do echo "    $p $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-80) Pss=$(pss "$p") kB"; done
}
cleanup() {
    kill "${agent_pid:-}" "${server_pid:-}" 2>/dev/null || true
    wait 2>/dev/null || true
    local ids
    ids=$(podman ps -aq --filter "label=agent=$agent")
    if [ -n "$ids" ]; then podman rm -f -t 0 $ids >/dev/null || true; fi
    rm -rf "$run"
}
trap cleanup EXIT

"$BIN/ank-server" --insecure --address "$addr" --run-folder "$run" 2>"$run/server.log" &
server_pid=$!
sleep 1
"$BIN/ank-agent" --insecure --name "$agent" --server-url "$url" --run-folder "$run" 2>"$run/agent.log" &
agent_pid=$!
for _ in $(seq 50); do ank get agents 2>/dev/null | grep -q "^$agent " && break; sleep 0.2; done
sleep 10
echo "idle, 0 workloads: PSS of the agent's tree $(median_pss $agent_pid) kB"
show_tree $agent_pid

{
    echo "apiVersion: v1"
    echo "workloads:"
    for i in $(seq -w 1 20); do
        printf '  w%s:\n    runtime: podman\n    agent: %s\n    runtimeConfig: |\n' "$i" "$agent"
        printf '      image: localhost/busybox:latest\n      commandArgs: ["sleep", "1000000"]\n'
    done
} >"$run/manifest.yaml"
ank apply "$run/manifest.yaml" >/dev/null
running=0
for _ in $(seq 300); do
    running=$(ank get workloads | grep -c "Running(Ok)" || true)
    [ "$running" = 20 ] && break
    sleep 0.5
done
echo "$running of 20 workloads Running(Ok)"
# A state can come from podman's event before `podman run -d` has exited:
# wait for the creates to end (on a busy machine that can take a while).
for _ in $(seq 120); do [ -z "$(pgrep -P $agent_pid -f 'podman run' || true)" ] && break; sleep 0.5; done
sleep 10
echo "idle, 20 workloads: PSS of the agent's tree $(median_pss $agent_pid) kB"
show_tree $agent_pid
echo "children of the agent (pgrep -P $agent_pid): [$(pgrep -P $agent_pid | tr '\n' ' ' || true)]"
for c in $(pgrep -P $agent_pid || true); do echo "    child $c: $(tr "\0" " " <"/proc/$c/cmdline" 2>/dev/null | cut -c1-120)"; done
ank delete workload $(seq -f 'w%02g' 1 20) >/dev/null
for _ in $(seq 120); do [ -z "$(podman ps -aq --filter "label=agent=$agent")" ] && break; sleep 0.5; done
