#!/usr/bin/env bash
# Builds and runs the orchestrator on its embedded default: ank-server with
# examples/sample.yaml, one ank-agent (agent_A), then shows the workloads.
# Both daemons keep running in the background; `--stop` (or CI=true) stops
# them again and removes the sample's container.
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh
cargo build --release --bins

bin=target/release
url=http://127.0.0.1:25551
logs=$(mktemp -d)
"$bin/ank-server" --insecure --address 127.0.0.1:25551 --startup-manifest examples/sample.yaml >"$logs/server.log" 2>&1 &
server=$!
"$bin/ank-agent" --insecure --name agent_A --server-url "$url" >"$logs/agent.log" 2>&1 &
agent=$!

stop() {
  kill "$agent" "$server" 2>/dev/null || true
  podman rm -f -t 0 --filter label=agent=agent_A >/dev/null 2>&1 || true
}

for _ in $(seq 1 150); do
  if "$bin/ank" --insecure --server-url "$url" get workloads 2>/dev/null | grep -q 'Running(Ok)'; then
    "$bin/ank" --insecure --server-url "$url" get workloads
    if [ "${1:-}" = "--stop" ] || [ "${CI:-}" = "true" ]; then
      stop
      echo "demo: stopped server and agent"
    else
      echo
      echo "demo: ank-server (pid $server) and ank-agent (pid $agent) keep running; logs in $logs"
      echo "demo: try '$bin/ank -k get state' or '$bin/ank -k apply FILE'"
      echo "demo: stop with: kill $agent $server"
    fi
    exit 0
  fi
  sleep 0.2
done
echo "demo: the sample workload did not reach Running(Ok) within 30 s" >&2
tail -n 20 "$logs/server.log" "$logs/agent.log" >&2
stop
exit 1
