# shellcheck shell=bash
# Cross-CLI scenarios of tests/harness/interop.sh (sourced by it; uses its helpers
# bin, cli, run_server, run_agent, cleanup_agent, make_certs, pass, fail).
#
# cli_scenario NAME CLIENT TLS: the `ank` of CLIENT (ref|ours) runs one fixed
# sequence of commands against a cluster of Ankaios' server and agent, then
# against a cluster of ours (same agent name, one after the other); the two
# transcripts (exit code, stdout and stderr of each command, normalized only
# for what varies between two runs: times, CPU/memory figures, the port and
# the work folder) must be equal. Every command runs under a timeout, so a
# hang is a difference too (exit code 124). `logs -f` and `get events` are
# ended with SIGINT, as Ctrl-C would, and must end within 5 s of it.

CLI_TIMEOUT=20

# cli_manifest AGENT: three busybox workloads: one that logs, one plain
# (tagged), one whose command comes from a config object.
cli_manifest() {
    cat <<EOF
apiVersion: v1
workloads:
  talker:
    runtime: podman
    agent: $1
    restartPolicy: NEVER
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sh", "-c", "echo hello from talker; echo second line; sleep 100001"]
  sleeper:
    runtime: podman
    agent: $1
    tags:
      owner: interop
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sleep", "100002"]
  configured:
    runtime: podman
    agent: $1
    configs:
      cfg: greeting
    runtimeConfig: |
      image: $IMAGE
      commandArgs: ["sh", "-c", "echo {{cfg.text}}; sleep {{cfg.seconds}}"]
configs:
  greeting:
    text: configured hello
    seconds: "100003"
EOF
}

# cli_set_state_file: the file of `ank set state`: a new config value and a
# changed tag of sleeper.
cli_set_state_file() {
    cat <<EOF
desiredState:
  apiVersion: v1
  configs:
    greeting:
      text: set hello
      seconds: "100004"
EOF
}

# cli_norm: what legitimately differs between two runs of the same commands:
# the server's port and the work folder (in messages), times (RFC 3339 time
# stamps), CPU and memory figures of agents (and the width of their column),
# then what cli_norm.py does.
cli_norm() {
    sed -E \
        -e "s#127\\.0\\.0\\.1:$CLI_PORT#127.0.0.1:PORT#g" \
        -e "s#$WORK#WORK#g" \
        -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+)/TIME/g' \
        -e 's/^(\s*"?(cpuUsage|freeMemory)"?:\s*)[0-9]+/\1N/' \
        -e 's/^(\s*"?(cpu|freeMemory|free_memory|cpu_usage)"?:\s*)[0-9]+/\1N/' \
        -e 's/^(\S+\s+[0-9]+\s+)[0-9]+%\s+[0-9]+B\s*$/\1CPU% MEMORYB/' \
        -e 's/^(NAME\s+WORKLOADS\s+CPU USAGE\s+FREE MEMORY)\s*$/\1/' |
        python3 -c "$CLI_NORM_PY" "$1"
}

# What varies between two runs of the same `ank` in the order of its output:
# - the waiting of apply, run and delete prints a table at every tick of its
#   spinner (on a terminal each overwrites the last): how many and with which
#   intermediate states depends on timing; kept: the lines before the first
#   table and the last table (the end state); Ankaios sorts that table's rows
#   by workload name only, over a HashMap, so two rows of one name (the new
#   and the removed instance) come in either order: ties are sorted;
# - Ankaios' ank prints some maps in the order of a Rust HashMap, which is
#   random per process: workloadStates (agents, workloads, instance ids) and
#   desiredState.configs (config names and the keys of config objects):
#   sorted by key, in YAML and JSON; every other order is kept;
# - `logs -n` of two workloads interleaves two streams: lines stably sorted
#   by workload name (each workload's own order kept).
CLI_NORM_PY='
import json, re, sys
label = sys.argv[1]
lines = sys.stdin.read().split("\n")

if any(l.startswith("Waiting for workload(s)") for l in lines):
    tables = [i for i, l in enumerate(lines) if l.startswith("WORKLOAD NAME")]
    if tables:
        lines = lines[: tables[0]] + lines[tables[-1] :]
        # Ankaios sorts the rows by workload name only, over a HashMap:
        # the rows of one name (a new and a removed instance) come in a
        # random order per process. Ties are put in one order.
        start = next(i for i, l in enumerate(lines) if l.startswith("WORKLOAD NAME")) + 1
        end = start
        while end < len(lines) and lines[end].strip():
            end += 1
        lines[start:end] = sorted(lines[start:end], key=lambda l: (l.split(" ", 1)[0], l))

def hashmap_path(path, n):
    """Is the map at path (keys from the root; n = len(path)) a HashMap?"""
    if path[:1] == ["completeState"]:
        path = path[1:]
    if path[:1] == ["workloadStates"] and len(path) <= 3:
        return True
    return path[:2] == ["desiredState", "configs"]

def sort_json(v, path):
    if isinstance(v, dict):
        items = [(k, sort_json(x, path + [k])) for k, x in v.items()]
        if hashmap_path(path, len(path)):
            items.sort(key=lambda kv: kv[0])
        return dict(items)
    if isinstance(v, list):
        return [sort_json(x, path + ["[]"]) for x in v]
    return v

text = "\n".join(lines)
try:
    obj = json.loads(text)
    pretty = json.dumps(obj, indent=2, ensure_ascii=False)
except ValueError:
    obj = pretty = None
if pretty is not None and pretty == text.rstrip("\n"):
    lines = (json.dumps(sort_json(obj, []), indent=2, ensure_ascii=False) + text[len(text.rstrip("\n")):]).split("\n")
elif not lines[0].startswith("{"):
    # YAML as serde_yaml prints it: a tree by indentation, list items one
    # deeper than their key.
    def depth(l):
        d = len(l) - len(l.lstrip(" "))
        return d + 1 if l[d:].startswith("- ") or l[d:] == "-" else d
    def key(l):
        m = re.match(r"\s*([^\s:-][^:]*):( |$)", l)
        return m.group(1).strip("\x27\"") if m else None
    def tree(i, d):
        nodes = []
        while i < len(lines) and lines[i] != "" and depth(lines[i]) > d:
            line = lines[i]
            kids, i = tree(i + 1, depth(line))
            nodes.append([line, kids])
        return nodes, i
    def emit(nodes, path, out):
        if hashmap_path(path, len(path)) and path and all(key(n[0]) for n in nodes):
            nodes = sorted(nodes, key=lambda n: key(n[0]))
        for line, kids in nodes:
            out.append(line)
            emit(kids, path + [key(line) or "[]"], out)
    out, i = [], 0
    while i < len(lines):
        if lines[i] == "":
            out.append(lines[i]); i += 1; continue
        nodes, i = tree(i, -1)
        emit(nodes, [], out)
    lines = out

if label.startswith("logs") and " -n" in label:
    body = [l for l in lines if l]
    body.sort(key=lambda l: l.split(" ", 1)[0])
    lines = body + [""]
print("\n".join(lines), end="")
'

# cli_record LABEL ARGS...: runs `ank ARGS` of CLI_CLIENT against
# CLI_PORT under a timeout; appends its exit code, stdout and stderr to
# CLI_OUT.
cli_record() {
    local label=$1 rc
    shift
    timeout "$CLI_TIMEOUT" "$(bin "$CLI_CLIENT" ank)" $(tls_args ank) -s "$(url "$CLI_PORT")" "$@" \
        >"$CLI_TMP.out" 2>"$CLI_TMP.err" </dev/null
    rc=$?
    cli_entry "$label" "$rc"
}

# cli_entry LABEL RC: appends an entry from CLI_TMP.out / .err.
cli_entry() {
    {
        echo "### $1"
        echo "--- exit $2"
        echo "--- stdout"
        cli_norm "$1" <"$CLI_TMP.out"
        echo "--- stderr"
        cli_norm "$1" <"$CLI_TMP.err"
    } >>"$CLI_OUT"
}

# cli_interrupted LABEL ACTION ARGS...: runs `ank ARGS` in the background,
# waits 2 s, runs the shell function ACTION (may be `:`), waits 2 s, sends
# SIGINT; the command must end within 5 s of it (else exit "hung").
cli_interrupted() {
    local label=$1 action=$2 pid rc i
    shift 2
    # timeout forwards the SIGINT to ank, whose SIGINT is at its default
    # (a background job of a script starts with SIGINT ignored).
    timeout -s INT "$CLI_TIMEOUT" "$(bin "$CLI_CLIENT" ank)" $(tls_args ank) -s "$(url "$CLI_PORT")" "$@" \
        >"$CLI_TMP.out" 2>"$CLI_TMP.err" </dev/null &
    pid=$!
    sleep 2
    "$action" >/dev/null 2>&1
    sleep 2
    kill -INT "$pid" 2>/dev/null
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rc=hung
    else
        wait "$pid"
        rc=$?
    fi
    cli_entry "$label (SIGINT)" "$rc"
}

# cli_wait LABEL SECONDS COND...: waits until the command COND succeeds (the
# stable state the next command needs); records a failure to reach it.
cli_wait() {
    local label=$1 end=$((SECONDS + $2))
    shift 2
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $end ]; then
            echo "### $label: not reached within the time" >>"$CLI_OUT"
            return 1
        fi
        sleep 0.2
    done
}

# cli_states WANT...: `ank get workloads` shows exactly the workloads and
# execution states WANT (name=state, sorted by name).
cli_states() {
    local got
    got=$(cli "$CLI_CLIENT" "$CLI_PORT" get workloads 2>/dev/null | awk 'NR > 1 { print $1 "=" $4 }' | sort)
    [ "$got" = "$(printf '%s\n' "$@" | sort)" ]
}

cli_agent_up() { cli "$CLI_CLIENT" "$CLI_PORT" get agents | grep -q "^$CLI_AGENT "; }

cli_delete_sleeper() { cli "$CLI_CLIENT" "$CLI_PORT" delete workload sleeper; }

# cli_transcript: the fixed command sequence.
cli_transcript() {
    local m=$WORK/cli.$CLI_AGENT.yaml s=$WORK/cli.$CLI_AGENT.set.yaml
    cli_manifest "$CLI_AGENT" >"$m"
    cli_set_state_file >"$s"
    cli_record "apply" apply "$m"
    cli_wait "all running" 60 cli_states configured=Running\(Ok\) sleeper=Running\(Ok\) talker=Running\(Ok\)
    cli_record "get workloads" get workloads
    cli_record "get state (masks)" get state desiredState.workloads.talker workloadStates
    cli_record "get state -o json (config)" get state -o json desiredState.configs
    cli_record "get state -o json (workload field)" get state -o json desiredState.workloads.sleeper.tags
    cli_record "get state (unknown mask)" get state desiredState.workloads.nothere
    cli_record "get agents" get agents
    cli_record "get configs" get configs
    cli_record "get workloads (names)" get workloads talker sleeper
    cli_record "get workloads --agent" get workloads --agent "$CLI_AGENT"
    cli_record "run workload" run workload runner --runtime podman --agent "$CLI_AGENT" \
        --config "$(printf 'image: %s\ncommandArgs: ["sleep", "100005"]' "$IMAGE")" --tags owner=run
    cli_wait "runner running" 60 cli_states configured=Running\(Ok\) runner=Running\(Ok\) sleeper=Running\(Ok\) talker=Running\(Ok\)
    cli_record "get workloads (after run)" get workloads
    cli_record "set state" set state desiredState.configs "$s"
    cli_wait "configured updated" 60 cli_states configured=Running\(Ok\) runner=Running\(Ok\) sleeper=Running\(Ok\) talker=Running\(Ok\)
    sleep 1
    cli_record "get state (after set)" get state desiredState.configs desiredState.workloads.configured
    cli_record "logs" logs talker
    cli_interrupted "logs -f" : logs -f talker
    cli_interrupted "logs -f -n two" : logs -f -n talker configured
    cli_interrupted "get events" cli_delete_sleeper get events desiredState.workloads
    cli_wait "sleeper gone" 60 cli_states configured=Running\(Ok\) runner=Running\(Ok\) talker=Running\(Ok\)
    cli_record "delete workload" delete workload runner talker
    cli_wait "deleted" 60 cli_states configured=Running\(Ok\)
    cli_record "delete workload (unknown)" delete workload nothere
    cli_record "apply -d" apply -d "$m"
    cli_wait "empty" 60 cli_states
    cli_record "get workloads (empty)" get workloads
    cli_record "get state (empty)" get state desiredState
}

# cli_run CLIENT KIND OUT: the transcript of CLIENT's ank against a cluster
# of KIND.
cli_run() {
    local kind=$2 run
    CLI_CLIENT=$1 CLI_OUT=$3
    CLI_PORT=$(free_port)
    CLI_TMP=$WORK/cli.tmp
    run="$WORK/$CLI_AGENT.$kind.run"
    : >"$CLI_OUT"
    run_server "$kind" "$CLI_PORT" "" "$WORK/$CLI_AGENT.$kind.server.log"
    run_agent "$kind" "$CLI_AGENT" "$CLI_PORT" "$run" "$WORK/$CLI_AGENT.$kind.agent.log"
    cli_wait "agent connected" 30 cli_agent_up
    cli_transcript
    kill -TERM "$AGENT" "$SERVER" 2>/dev/null
    wait "$AGENT" "$SERVER" 2>/dev/null
    cleanup_agent "$CLI_AGENT"
}

# cli_scenario NAME CLIENT TLS
cli_scenario() {
    local name=$1 client=$2 a b first
    TLS=$3
    [ "$TLS" = 1 ] && make_certs
    CLI_AGENT="interop_cli_$$"
    a=$WORK/cli.$name.ref.txt
    b=$WORK/cli.$name.ours.txt
    cli_run "$client" ref "$a"
    cli_run "$client" ours "$b"
    TLS=0
    if cmp -s "$a" "$b"; then
        pass "$name" "$(grep -c '^### ' "$a") commands, same output against Ankaios' cluster and ours"
        return
    fi
    # The first entry that differs.
    first=$(diff "$a" "$b" | head -1 | grep -oE '^[0-9]+')
    first=$(head -n "$first" "$a" | grep '^### ' | tail -1)
    fail "$name" "'${first#\#\#\# }' differs (Ankaios' cluster < > ours; transcripts in $WORK/cli.$name.*.txt): $(diff "$a" "$b" | head -12 | tr '\n' '|')"
}
