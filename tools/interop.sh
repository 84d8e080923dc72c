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
SDK_IMAGE=${INTEROP_SDK_IMAGE:-localhost/ankpy:latest}
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

pass() { echo "PASS $1${2:+ ($2)}"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1: $2"; FAILED=$((FAILED + 1)); }

# TLS=1: daemons and clients use the certificates of make_certs; TLS=0:
# --insecure everywhere.
TLS=0
CERTS="$WORK/certs"

# make_certs: a CA and certificates for ank-server, ank-agent (any agent
# name) and ank, made with openssl exactly as Ankaios' mTLS guide
# (doc/docs/usage/mtls-setup.md) makes them: ED25519 keys, the server's SAN
# `ank-server`, extended key usages serverAuth / clientAuth.
make_certs() {
    [ -f "$CERTS/ca.pem" ] && return 0
    mkdir -p "$CERTS"
    (
        cd "$CERTS" || exit 1
        printf '[req]\ndistinguished_name = req_distinguished_name\nprompt = no\n[req_distinguished_name]\nCN = ankaios-ca\n' >ca.cnf
        openssl genpkey -algorithm ED25519 -out ca-key.pem
        openssl req -config ca.cnf -new -x509 -key ca-key.pem -out ca.pem
        for who in ank-server:serverAuth:ank-server ank-agent:clientAuth:'*' ank:clientAuth:ank; do
            IFS=: read -r name usage san <<<"$who"
            printf '[req]\ndistinguished_name = req_distinguished_name\nreq_extensions = v3_req\nprompt = no\n[req_distinguished_name]\nCN = %s\n[v3_req]\nsubjectAltName = @alt_names\nextendedKeyUsage = %s\n[alt_names]\nDNS.1 = %s\n' \
                "$name" "$usage" "$san" >"$name.cnf"
            openssl genpkey -algorithm ED25519 -out "$name-key.pem"
            openssl req -config "$name.cnf" -new -key "$name-key.pem" -out "$name.csr"
            openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca-key.pem -extensions v3_req \
                -extfile "$name.cnf" -out "$name.pem"
        done
    ) >"$WORK/certs.log" 2>&1 || { echo "cannot make certificates (see $WORK/certs.log)" >&2; exit 2; }
}

# tls_args WHO: the TLS flags of ank-server, ank-agent or ank.
tls_args() {
    if [ "$TLS" = 1 ]; then
        echo "--ca_pem $CERTS/ca.pem --crt_pem $CERTS/$1.pem --key_pem $CERTS/$1-key.pem"
    else
        echo "-k"
    fi
}

# url PORT: the server's URL for agents and clients.
url() { if [ "$TLS" = 1 ]; then echo "https://127.0.0.1:$1"; else echo "http://127.0.0.1:$1"; fi; }

# free_port: a port nothing listens on.
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 20000))
        ss -Htln "sport = :$port" 2>/dev/null | grep -q . || { echo "$port"; return; }
    done
}

# run_server KIND PORT MANIFEST LOG: starts a server, its pid in SERVER.
run_server() {
    local kind=$1 port=$2 manifest=$3 log=$4 extra=()
    if [ "$kind" = ours ]; then
        mkdir -p "$WORK/server.$port"
        extra=(--run-folder "$WORK/server.$port")
    fi
    # shellcheck disable=SC2046
    "$(bin "$kind" ank-server)" $(tls_args ank-server) -a "127.0.0.1:$port" ${manifest:+-m "$manifest"} \
        "${extra[@]}" >"$log" 2>&1 &
    SERVER=$!
    PIDS+=("$SERVER")
}

# run_agent KIND NAME PORT RUN LOG: starts an agent, its pid in AGENT.
run_agent() {
    local kind=$1 name=$2 port=$3 run=$4 log=$5
    mkdir -p "$run"
    AGENTS+=("$name")
    # shellcheck disable=SC2046
    "$(bin "$kind" ank-agent)" $(tls_args ank-agent) -n "$name" -s "$(url "$port")" -r "$run" >"$log" 2>&1 &
    AGENT=$!
    PIDS+=("$AGENT")
}

# cli KIND PORT ARGS...: the `ank` of KIND against the server on PORT.
cli() {
    local kind=$1 port=$2
    shift 2
    # shellcheck disable=SC2046
    "$(bin "$kind" ank)" $(tls_args ank) -s "$(url "$port")" "$@"
}

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

# The program of the control-interface workload: Ankaios' Python SDK
# (localhost/ankpy, tools/build-sdk-image.sh) asks for the state every
# 0.5 s and prints `answer N EPOCH` or `error ... EPOCH`; the SDK sends a
# new Hello when its agent went away and came back.
CI_PROGRAM='import time
from ankaios_sdk import Ankaios
ank = Ankaios()
n = 0
while True:
    try:
        ank.get_state(["desiredState.workloads.withci.agent"], timeout=2)
        n += 1
        print(f"answer {n} {time.time():.3f}", flush=True)
    except Exception as e:
        print(f"error {type(e).__name__} {time.time():.3f}", flush=True)
    time.sleep(0.5)'

# manifest AGENT: the workloads of a takeover on AGENT: 10 podman workloads
# (one with dependencies, one with files, one talking to the control
# interface) and one podman-kube workload.
manifest() {
    local agent=$1 pod="pod-${1//_/-}" i
    echo "apiVersion: v1"
    echo "workloads:"
    for i in 0 1 2 3 4 5 6; do
        cat <<EOF
  plain$i:
    runtime: podman
    agent: $agent
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "10000$i"]
EOF
    done
    cat <<EOF
  withdeps:
    runtime: podman
    agent: $agent
    dependencies:
      plain0: ADD_COND_RUNNING
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100010"]
  withfiles:
    runtime: podman
    agent: $agent
    files:
      - mountPoint: /etc/greeting
        data: "hello\\n"
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100011"]
  withci:
    runtime: podman
    agent: $agent
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMasks: ["desiredState.workloads.withci"]
    files:
      - mountPoint: /app/talk.py
        data: |
$(echo "$CI_PROGRAM" | sed 's/^/          /')
    runtimeConfig: |
      image: $SDK_IMAGE
      commandOptions: ["-e", "PYTHONPATH=/opt/sdk", "-e", "PYTHONUNBUFFERED=1"]
      commandArgs: ["python3", "/app/talk.py"]
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
NAMES="plain0 plain1 plain2 plain3 plain4 plain5 plain6 withdeps withfiles withci kube"

# start KIND AGENT PORT RUN: server and agent of KIND (ref|ours).
start() {
    run_server "$1" "$3" "$WORK/$2.yaml" "$WORK/$2.$1.server.log"
    run_agent "$1" "$2" "$3" "$4" "$WORK/$2.$1.agent.log"
}

# stop: SIGTERM to agent and server (Ankaios' agent leaves its workloads).
stop() {
    kill -TERM "$AGENT" "$SERVER" 2>/dev/null
    wait "$AGENT" "$SERVER" 2>/dev/null
}

# all_running KIND PORT: every workload Running(Ok) in `ank get workloads`.
all_running() {
    local out n
    out=$(cli "$1" "$2" get workloads 2>/dev/null) || return 1
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

# answered_since AGENT EPOCH SECONDS: the control-interface workload got an
# answer after EPOCH (waits up to SECONDS for it).
answered_since() {
    local id end=$((SECONDS + $3))
    id=$(podman ps -q --filter "label=agent=$1" --filter "name=^withci\\.")
    [ -n "$id" ] || return 1
    until podman logs "$id" 2>/dev/null | awk -v t0="$2" '$1 == "answer" && $3 > t0 { ok = 1 } END { exit !ok }'; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.2
    done
}

# takeover NAME FROM TO: FROM runs the workloads, TO takes them over.
takeover() {
    local name=$1 from=$2 to=$3 agent="interop_${2}_${3}_$$" port run before after since t0 events pods volumes took
    port=$(free_port)
    run="$WORK/$agent.run"
    manifest "$agent" >"$WORK/$agent.yaml"
    start "$from" "$agent" "$port" "$run"
    if ! wait_running "$from" "$port" 120 || ! answered_since "$agent" 0 30; then
        stop
        fail "$name" "the workloads did not all run (and talk) under $from (logs: $WORK)"
        return
    fi
    before=$(snapshot "$agent")
    pods=$(podman pod ps -q --no-trunc --filter "name=pod-${agent//_/-}")
    volumes=$(podman volume ls -q | grep -E "\.${agent}\.(config|pods)\$")
    stop
    sleep 1.1
    since=$(date +%s)
    port=$(free_port)
    t0=$(date +%s.%N)
    start "$to" "$agent" "$port" "$run"
    if ! wait_running "$to" "$port" 60; then
        fail "$name" "not all Running(Ok) under $to within 60 s (logs: $WORK): $(cli "$to" "$port" get workloads 2>&1 | tr -s ' ' | tr '\n' ';')"
        stop
        cleanup_agent "$agent"
        return
    fi
    took=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
    sleep 3
    after=$(snapshot "$agent")
    events=$(lifecycle_events "$since" $(echo "$before" | cut -d' ' -f1) $pods $volumes)
    if ! all_running "$to" "$port"; then
        fail "$name" "a workload left Running(Ok) after the takeover (logs: $WORK): $(cli "$to" "$port" get workloads 2>&1 | tr -s ' ' | tr '\n' ';')"
    elif [ "$before" != "$after" ]; then
        fail "$name" "containers changed: before [$(echo "$before" | tr '\n' ';')] after [$(echo "$after" | tr '\n' ';')]"
    elif [ -n "$events" ]; then
        fail "$name" "lifecycle events during the takeover: $(echo "$events" | tr '\n' ';')"
    elif ! answered_since "$agent" "$t0" 20; then
        fail "$name" "the control-interface workload got no answer from $to's agent: $(podman logs --tail 5 "$(podman ps -q --filter "label=agent=$agent" --filter "name=^withci\\.")" 2>&1 | tr '\n' ';')"
    else
        pass "$name" "$(echo "$before" | wc -l) containers adopted, all Running(Ok) ${took} s after $to started, the control-interface workload answered again"
    fi
    stop
    cleanup_agent "$agent"
}

# shellcheck source=interop/cli.sh
source "$(dirname "$0")/interop/cli.sh"

takeover ankaios-to-ank ref ours
takeover ank-to-ankaios ours ref
cli_scenario ankaios-cli-on-ank-server ref 0
cli_scenario ank-cli-on-ankaios-server ours 0
cli_scenario ankaios-cli-on-ank-server-mtls ref 1
cli_scenario ank-cli-on-ankaios-server-mtls ours 1
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
