#!/usr/bin/env bash
# Interoperability with Eclipse Ankaios on real podman: a node is switched
# from Ankaios to ank and from ank to Ankaios while its workloads run, and
# every workload must be adopted (same container ids and StartedAt, no
# lifecycle event in `podman events`, all Running(Ok) under the new agent).
#
#   bash tools/interop.sh REF_BIN_DIR [OUR_BIN_DIR]
#
# REF_BIN_DIR holds Ankaios' ank-server, ank-agent and ank (build them from
# the reference tree with `cargo build --release --target
# x86_64-unknown-linux-gnu -p ank-server -p ank-agent -p ank`); OUR_BIN_DIR
# defaults to target/release. A developer tool: CI cannot fetch the
# reference. Prints one `PASS name` / `FAIL name: why` line per scenario and
# `N passed, N failed`; exits 1 when a scenario failed. Only what this script
# created is removed (containers labelled with its agent names, its pods and
# volumes). See docs/migration.md.
set -u

REF=${1:?usage: tools/interop.sh REF_BIN_DIR [OUR_BIN_DIR]}
OURS=${2:-$(dirname "$0")/../target/release}
IMAGE=${INTEROP_IMAGE:-localhost/busybox:latest}
for dir in "$REF" "$OURS"; do
    for b in ank-server ank-agent ank; do
        [ -x "$dir/$b" ] || { echo "missing $dir/$b" >&2; exit 2; }
    done
done
command -v podman >/dev/null || { echo "podman not found: run tools/setup.sh" >&2; exit 2; }
command -v python3 >/dev/null || { echo "python3 not found" >&2; exit 2; }

WORK=$(mktemp -d /tmp/ank-interop.XXXXXX)
PIDS=()
AGENTS=()
PASSED=0
FAILED=0

bin() { if [ "$1" = ref ]; then echo "$REF/$2"; else echo "$OURS/$2"; fi; }

cleanup_agent() {
    local agent=$1 ids
    ids=$(podman ps -a -q --filter "label=agent=$agent")
    [ -n "$ids" ] && podman rm -f -t 0 $ids >/dev/null 2>&1
    podman pod rm -f -t 0 "pod-${agent//_/-}" >/dev/null 2>&1
    podman volume ls -q | grep -E "\.${agent}\.(config|pods)\$" | xargs -r podman volume rm -f >/dev/null 2>&1
}

cleanup() {
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for a in "${AGENTS[@]}"; do cleanup_agent "$a"; done
    # The daemons' logs are kept when a scenario failed.
    [ "$FAILED" -eq 0 ] && rm -rf "$WORK"
}
trap cleanup EXIT

# manifest AGENT: the workloads of a scenario on AGENT.
manifest() {
    local agent=$1 pod="pod-${1//_/-}"
    cat <<EOF
apiVersion: v1
workloads:
  plain0:
    runtime: podman
    agent: $agent
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100000"]
  plain1:
    runtime: podman
    agent: $agent
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100001"]
  withdeps:
    runtime: podman
    agent: $agent
    dependencies:
      plain0: ADD_COND_RUNNING
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100002"]
  withfiles:
    runtime: podman
    agent: $agent
    files:
      - mountPoint: /etc/greeting
        data: "hello\\n"
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100003"]
  withci:
    runtime: podman
    agent: $agent
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads"]
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100004"]
  kube:
    runtime: podman-kube
    agent: $agent
    runtimeConfig: |
      manifest: |
        apiVersion: v1
        kind: Pod
        metadata:
          name: $pod
        spec:
          restartPolicy: Never
          containers:
          - name: main
            image: $IMAGE
            imagePullPolicy: Never
            command: ["/bin/sh", "-c", "sleep 100000"]
EOF
}
NAMES="plain0 plain1 withdeps withfiles withci kube"

# start KIND AGENT PORT RUN: server and agent of KIND (ref|ours).
start() {
    local kind=$1 agent=$2 port=$3 run=$4 extra=()
    [ "$kind" = ours ] && extra=(--run-folder "$run/server")
    mkdir -p "$run/server"
    "$(bin "$kind" ank-server)" -k -a "127.0.0.1:$port" -m "$WORK/$agent.yaml" "${extra[@]}" \
        >"$WORK/$agent.$kind.server.log" 2>&1 &
    SERVER=$!
    PIDS+=("$SERVER")
    "$(bin "$kind" ank-agent)" -k -n "$agent" -s "http://127.0.0.1:$port" -r "$run" \
        >"$WORK/$agent.$kind.agent.log" 2>&1 &
    AGENT=$!
    PIDS+=("$AGENT")
}

# stop: SIGTERM to agent and server (Ankaios' agent leaves its workloads).
stop() {
    kill -TERM "$AGENT" "$SERVER" 2>/dev/null
    wait "$AGENT" "$SERVER" 2>/dev/null
}

# all_running KIND PORT: every workload Running(Ok) in `ank get workloads`.
all_running() {
    local out n
    out=$("$(bin "$1" ank)" -k -s "http://127.0.0.1:$2" get workloads 2>/dev/null) || return 1
    for n in $NAMES; do
        echo "$out" | awk -v n="$n" '$1 == n && $4 == "Running(Ok)" { found = 1 } END { exit !found }' || return 1
    done
}

# wait_running KIND PORT SECONDS
wait_running() {
    local end=$((SECONDS + $3))
    until all_running "$1" "$2"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.1
    done
}

# snapshot AGENT: "id startedAt" of the agent's containers and its pod's.
snapshot() {
    local ids
    ids=$( (podman ps -a -q --no-trunc --filter "label=agent=$1"
        podman ps -a -q --no-trunc --filter "pod=pod-${1//_/-}") | sort -u)
    [ -n "$ids" ] && podman inspect --format '{{.Id}} {{.State.StartedAt}} {{.State.Running}}' $ids | sort
}

# lifecycle_events SINCE IDS...: lifecycle events of those containers/pods.
lifecycle_events() {
    local since=$1
    shift
    # --stream=false: with --until, podman's file event logger printed nothing.
    podman events --format json --since "$since" --stream=false 2>/dev/null |
        python3 -c '
import json, sys
ids = set(sys.argv[1:])
bad = {"create","init","start","restart","stop","kill","died","cleanup","remove","pause","unpause"}
for line in sys.stdin:
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("Status") in bad and (e.get("ID") in ids or e.get("Name") in ids):
        print(e.get("Type"), e.get("Status"), e.get("Name"))
' "$@"
}

# takeover NAME FROM TO: FROM runs the workloads, TO takes them over.
takeover() {
    local name=$1 from=$2 to=$3 agent="interop_${2}_${3}_$$" port run before after since t0 events pods volumes
    AGENTS+=("$agent")
    port=$((20000 + RANDOM % 20000))
    run="$WORK/$agent.run"
    mkdir -p "$run"
    manifest "$agent" >"$WORK/$agent.yaml"
    start "$from" "$agent" "$port" "$run"
    if ! wait_running "$from" "$port" 120; then
        stop
        echo "FAIL $name: the workloads did not all run under $from (logs: $WORK)"
        FAILED=$((FAILED + 1))
        return
    fi
    before=$(snapshot "$agent")
    pods=$(podman pod ps -q --no-trunc --filter "name=pod-${agent//_/-}")
    volumes=$(podman volume ls -q | grep -E "\.${agent}\.(config|pods)\$")
    stop
    sleep 1.1
    since=$(date +%s)
    port=$((20000 + RANDOM % 20000))
    t0=$(date +%s.%N)
    start "$to" "$agent" "$port" "$run"
    if ! wait_running "$to" "$port" 60; then
        echo "FAIL $name: not all Running(Ok) under $to within 60 s (logs: $WORK): $("$(bin "$to" ank)" -k -s "http://127.0.0.1:$port" get workloads 2>&1 | tr '\n' ';')"
        FAILED=$((FAILED + 1))
        stop
        cleanup_agent "$agent"
        return
    fi
    local took
    took=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
    sleep 3
    after=$(snapshot "$agent")
    events=$(lifecycle_events "$since" $(echo "$before" | cut -d' ' -f1) $pods $volumes)
    if ! all_running "$to" "$port"; then
        echo "FAIL $name: a workload left Running(Ok) after the takeover (logs: $WORK): $("$(bin "$to" ank)" -k -s "http://127.0.0.1:$port" get workloads 2>&1 | tr -s ' ' | tr '\n' ';')"
        FAILED=$((FAILED + 1))
    elif [ "$before" != "$after" ]; then
        echo "FAIL $name: containers changed: before [$(echo "$before" | tr '\n' ';')] after [$(echo "$after" | tr '\n' ';')]"
        FAILED=$((FAILED + 1))
    elif [ -n "$events" ]; then
        echo "FAIL $name: lifecycle events during the takeover: $(echo "$events" | tr '\n' ';')"
        FAILED=$((FAILED + 1))
    else
        echo "PASS $name ($(echo "$before" | wc -l) containers adopted, all Running(Ok) ${took} s after $to started)"
        PASSED=$((PASSED + 1))
    fi
    stop
    cleanup_agent "$agent"
}

takeover ankaios-to-ank ref ours
takeover ank-to-ankaios ours ref
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
