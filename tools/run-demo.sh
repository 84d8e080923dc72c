#!/usr/bin/env bash
# Builds and runs the orchestrator on its embedded default: ank-server with
# examples/sample.yaml, one ank-agent (agent_A), then shows the workloads.
# Both daemons keep running in the background; their pids are in
# target/demo.pids. `--stop` stops the demo that runs (and removes the
# sample's container); a second start while one runs says so and starts
# nothing. Under CI=true the demo is stopped right after it showed the
# workloads.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=target/release
url=http://127.0.0.1:25551
pids=target/demo.pids

# The pids of the running demo ("server agent"), if its daemons still run.
running_demo() {
  [ -f "$pids" ] || return 1
  local server agent
  read -r server agent <"$pids" || return 1
  is_ours "$server" ank-server && is_ours "$agent" ank-agent || return 1
  echo "$server $agent"
}
is_ours() { [ -n "$1" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q "$2"; }

stop() {
  kill "$@" 2>/dev/null || true
  for _ in $(seq 1 100); do
    local alive=0 p
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  podman rm -f -t 0 --filter label=agent=agent_A >/dev/null 2>&1 || true
  rm -f "$pids"
}

if [ "${1:-}" = "--stop" ]; then
  if demo=$(running_demo); then
    # shellcheck disable=SC2086 # two pids
    stop $demo
    echo "demo: stopped server and agent (pids $demo)"
  else
    rm -f "$pids"
    echo "demo: no demo runs"
  fi
  exit 0
fi
if demo=$(running_demo); then
  echo "demo: a demo runs already (server and agent pids $demo); stop it with: bash tools/run-demo.sh --stop" >&2
  exit 1
fi

bash tools/setup.sh
cargo build --release --bins

logs=$(mktemp -d)
"$bin/ank-server" --insecure --address 127.0.0.1:25551 --startup-manifest examples/sample.yaml >"$logs/server.log" 2>&1 &
server=$!
"$bin/ank-agent" --insecure --name agent_A --server-url "$url" >"$logs/agent.log" 2>&1 &
agent=$!
echo "$server $agent" >"$pids"

for _ in $(seq 1 150); do
  if "$bin/ank" --insecure --server-url "$url" get workloads 2>/dev/null | grep -q 'Running(Ok)'; then
    "$bin/ank" --insecure --server-url "$url" get workloads
    if [ "${CI:-}" = "true" ]; then
      stop "$agent" "$server"
      echo "demo: stopped server and agent"
    else
      echo
      echo "demo: ank-server (pid $server) and ank-agent (pid $agent) keep running; logs in $logs"
      echo "demo: try '$bin/ank -k get state' or '$bin/ank -k apply FILE'"
      echo "demo: stop with: bash tools/run-demo.sh --stop"
    fi
    exit 0
  fi
  sleep 0.2
done
echo "demo: the sample workload did not reach Running(Ok) within 30 s" >&2
tail -n 20 "$logs/server.log" "$logs/agent.log" >&2
stop "$agent" "$server"
exit 1
