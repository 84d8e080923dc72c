#!/usr/bin/env bash
# Interoperability with Eclipse Ankaios on real podman:
# - takeover: a node is switched from Ankaios to ank and from ank to
#   Ankaios while its workloads run; every workload must be adopted (same
#   container ids and StartedAt, no lifecycle event in `podman events`, all
#   Running(Ok) under the new agent, the control-interface workload
#   answered by the new agent);
# - mixed: an Ankaios agent and ours on one server (ours, then Ankaios'),
#   insecure and with mTLS: dependencies across the agents, delete,
#   notReported, no complaint in Ankaios' logs;
# - cli: Ankaios' ank against our server and ours against Ankaios'
#   (tests/harness/interop/cli.sh).
#
#   bash tests/harness/interop.sh REF_BIN_DIR [OUR_BIN_DIR]
#   INTEROP_ONLY=REGEX bash tests/harness/interop.sh ...   (only the scenarios whose names match)
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

REF=${1:?usage: tests/harness/interop.sh REF_BIN_DIR [OUR_BIN_DIR]}
OURS=${2:-$(dirname "$0")/../../target/release}
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

# selected NAME: the scenario runs (INTEROP_ONLY, a regex, picks some).
selected() { [ -z "${INTEROP_ONLY:-}" ] || [[ $1 =~ $INTEROP_ONLY ]]; }

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
    # Agents and clients start once it listens.
    local end=$((SECONDS + 10))
    until ss -Htln "sport = :$port" 2>/dev/null | grep -q .; do
        [ $SECONDS -ge $end ] && break
        sleep 0.05
    done
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
    [ "${INTEROP_KEEP:-0}" = 1 ] || { [ "$FAILED" -eq 0 ] && rm -rf "$WORK"; }
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

# mixed_manifest A_REF B_OURS: workloads on an Ankaios agent and on ours
# whose dependencies cross between them both ways.
mixed_manifest() {
    cat <<EOF
apiVersion: v1
workloads:
  a_base:
    runtime: podman
    agent: $1
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "200000"]
  b_dep:
    runtime: podman
    agent: $2
    dependencies:
      a_base: ADD_COND_RUNNING
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "200001"]
  b_base:
    runtime: podman
    agent: $2
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "200002"]
  a_dep:
    runtime: podman
    agent: $1
    dependencies:
      b_base: ADD_COND_RUNNING
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "200003"]
  a_once:
    runtime: podman
    agent: $1
    restartPolicy: NEVER
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sh", "-c", "sleep 1; exit 0"]
  b_after:
    runtime: podman
    agent: $2
    dependencies:
      a_once: ADD_COND_SUCCEEDED
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "200004"]
EOF
}

# states KIND PORT: "name agent state" of every workload.
states() { cli "$1" "$2" get workloads 2>/dev/null | awk 'NR > 1 { print $1, $2, $4 }' | sort; }

# container_time AGENT WORKLOAD FIELD: StartedAt or FinishedAt, as epoch ns.
container_time() {
    local id
    id=$(podman ps -a -q --filter "label=agent=$1" --filter "name=^$2\\.")
    [ -n "$id" ] || return 1
    date -d "$(podman inspect --format "{{.State.$3}}" "$id" | sed 's/ [A-Z]*$//')" +%s%N
}

# mixed NAME SERVER_KIND: an Ankaios agent and ours on one server of
# SERVER_KIND, driven by that server's own CLI.
mixed() {
    local name=$1 kind=$2 a="mx_ref_$$_$TLS" b="mx_ours_$$_$TLS" port want got end t
    port=$(free_port)
    [ "$TLS" = 1 ] && make_certs
    run_server "$kind" "$port" "" "$WORK/$name.server.log"
    local server=$SERVER
    run_agent ref "$a" "$port" "$WORK/$name.$a.run" "$WORK/$name.$a.log"
    local agent_a=$AGENT
    run_agent ours "$b" "$port" "$WORK/$name.$b.run" "$WORK/$name.$b.log"
    local agent_b=$AGENT
    mixed_manifest "$a" "$b" >"$WORK/$name.yaml"
    # Both agents connected before the apply (`ank get agents` lists them).
    end=$((SECONDS + 20))
    until [ "$(cli "$kind" "$port" get agents 2>/dev/null | grep -c -E "^($a|$b) ")" = 2 ]; do
        [ $SECONDS -ge $end ] && break
        sleep 0.2
    done
    want=$(printf '%s\n' "a_base $a Running(Ok)" "a_dep $a Running(Ok)" "a_once $a Succeeded(Ok)" \
        "b_after $b Running(Ok)" "b_base $b Running(Ok)" "b_dep $b Running(Ok)")
    if ! timeout 60 "$(bin "$kind" ank)" $(tls_args ank) -s "$(url "$port")" apply "$WORK/$name.yaml" \
        >"$WORK/$name.apply.out" 2>&1; then
        fail "$name" "apply failed: $(tail -n 3 "$WORK/$name.apply.out" | tr '\n' ';')"
    else
        end=$((SECONDS + 60))
        until got=$(states "$kind" "$port"); [ "$got" = "$want" ] || [ $SECONDS -ge $end ]; do sleep 0.2; done
        if [ "$got" != "$want" ]; then
            fail "$name" "states: got [$(echo "$got" | tr '\n' ';')] want [$(echo "$want" | tr '\n' ';')] (logs: $WORK)"
        elif [ "$(container_time "$a" a_dep StartedAt)" -lt "$(container_time "$b" b_base StartedAt)" ] ||
            [ "$(container_time "$b" b_dep StartedAt)" -lt "$(container_time "$a" a_base StartedAt)" ] ||
            [ "$(container_time "$b" b_after StartedAt)" -lt "$(container_time "$a" a_once FinishedAt)" ]; then
            fail "$name" "a dependency across the agents did not hold (container start times)"
        elif [ "$kind" = ours ] && ! mixed_not_reported "$port" "$a" "$b"; then
            fail "$name" "ank get agents -o yaml does not say what the Ankaios agent does not report: $(cli ours "$port" get agents -o yaml 2>&1 | tr '\n' ';')"
        elif ! timeout 60 "$(bin "$kind" ank)" $(tls_args ank) -s "$(url "$port")" delete workload a_dep b_dep \
            >"$WORK/$name.delete.out" 2>&1; then
            fail "$name" "delete failed: $(tail -n 3 "$WORK/$name.delete.out" | tr '\n' ';')"
        else
            end=$((SECONDS + 30))
            until [ -z "$(podman ps -a -q --filter "label=agent=$a" --filter "name=^a_dep\\.")$(podman ps -a -q --filter "label=agent=$b" --filter "name=^b_dep\\.")" ]; do
                [ $SECONDS -ge $end ] && break
                sleep 0.2
            done
            got=$(states "$kind" "$port")
            t=$(printf '%s\n' "a_base $a Running(Ok)" "a_once $a Succeeded(Ok)" "b_after $b Running(Ok)" "b_base $b Running(Ok)")
            if [ -n "$(podman ps -a -q --filter "label=agent=$a" --filter "name=^a_dep\\.")$(podman ps -a -q --filter "label=agent=$b" --filter "name=^b_dep\\.")" ]; then
                fail "$name" "the deleted workloads' containers are still there"
            elif [ "$got" != "$t" ]; then
                fail "$name" "after the delete: [$(echo "$got" | tr '\n' ';')]"
            elif t=$(ankaios_complaints "$WORK/$name.server.log" "$WORK/$name.$a.log"); [ -n "$t" ]; then
                fail "$name" "Ankaios' daemons complained: $(echo "$t" | head -n 3 | tr '\n' ';')"
            else
                pass "$name" "6 workloads on both agents, dependencies held both ways, delete removed both"
            fi
        fi
    fi
    kill -TERM "$agent_a" "$agent_b" "$server" 2>/dev/null
    wait "$agent_a" "$agent_b" "$server" 2>/dev/null
    cleanup_agent "$a"
    cleanup_agent "$b"
}

# ankaios_complaints LOG...: the warnings and errors in Ankaios' logs, but
# for its missing containerd client (nerdctl), which is this machine's.
ankaios_complaints() { cat "$@" 2>/dev/null | grep -E '^\[[^]]* (WARN|ERROR) ' | grep -v -e nerdctl -e 'INSECURE MODE'; }

# mixed_not_reported PORT REF_AGENT OUR_AGENT: our server's `ank get agents
# -o yaml` names what the Ankaios agent does not report, and nothing for ours.
mixed_not_reported() {
    cli ours "$1" get agents -o yaml 2>/dev/null | python3 -c '
import sys, yaml
agents = {a.get("name"): a for a in yaml.safe_load(sys.stdin) or []}
ref, ours = agents.get(sys.argv[1], {}), agents.get(sys.argv[2], {})
sys.exit(0 if ref.get("notReported") and ours and not ours.get("notReported") else 1)
' "$2" "$3"
}

# shellcheck source=interop/cli.sh
source "$(dirname "$0")/interop/cli.sh"

selected ankaios-to-ank && takeover ankaios-to-ank ref ours
selected ank-to-ankaios && takeover ank-to-ankaios ours ref
selected mixed-on-ank-server && mixed mixed-on-ank-server ours
selected mixed-on-ankaios-server && mixed mixed-on-ankaios-server ref
TLS=1
selected mixed-on-ank-server-mtls && mixed mixed-on-ank-server-mtls ours
selected mixed-on-ankaios-server-mtls && mixed mixed-on-ankaios-server-mtls ref
TLS=0
selected ankaios-cli-on-ank-server && cli_scenario ankaios-cli-on-ank-server ref 0
selected ank-cli-on-ankaios-server && cli_scenario ank-cli-on-ankaios-server ours 0
selected ankaios-cli-on-ank-server-mtls && cli_scenario ankaios-cli-on-ank-server-mtls ref 1
selected ank-cli-on-ankaios-server-mtls && cli_scenario ank-cli-on-ankaios-server-mtls ours 1
TLS=0
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
