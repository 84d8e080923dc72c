#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into seeds/<target>/
(protobuf encoded by hand, no dependencies). The input layout of each
target is described at the top of its fuzz_targets/<target>.rs:

- control_interface_frames: config byte, chunk-size count, chunk sizes,
  then the stream;
- manifest_parser: the manifest text;
- state_update_masks: the byte that picks the current state, then an
  UpdateStateRequest;
- grpc_domain_decode: 0 and a ToServer, or 1 and a FromServer;
- grpc_stream_sequences: set-up flags, stream count, one byte per stream,
  then steps (stream, message template, parameter);
- config_templates: a template, then optionally a NUL and a config item
  in YAML."""
import pathlib


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(num, payload):
    """A length-delimited field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def frame(message):
    return varint(len(message)) + message


HELLO = ld(1, ld(2, "1.0.0"))


def request(rid, content_field, content):
    return ld(3, ld(1, rid) + ld(content_field, content))


def complete_state(masks, subscribe=False):
    return b"".join(ld(1, m) for m in masks) + (b"\x10\x01" if subscribe else b"")


def update_config(key, value):
    item = ld(1, value)  # ConfigItem.String
    config_map = ld(1, ld(1, key) + ld(2, item))  # map entry
    state = ld(1, ld(3, config_map))  # CompleteState.desiredState.configs
    return state + ld(2, f"desiredState.configs.{key}")


def logs(*names):
    return b"".join(ld(1, ld(1, n)) for n in names)


SEEDS = {
    # rules 2 (desiredState rw, workloadStates r, logs app*), limit 4 MiB, 1-byte chunks
    "hello_read_update": (0x17, [0], [
        HELLO,
        request("r1", 3, complete_state(["workloadStates"])),
        request("r2", 3, complete_state(["desiredState.configs"], subscribe=True)),
        request("r3", 2, update_config("bench", "v1")),
        request("r4", 6, b""),
    ]),
    "logs_and_denials": (0x16, [6, 2, 200], [
        HELLO,
        request("l1", 4, logs("app_1", "app_secret")),
        request("l2", 5, b""),
        request("d1", 3, complete_state(["agents"])),
        request("d2", 3, complete_state([])),
    ]),
    "request_before_hello": (0x0D, [255], [
        request("r1", 3, complete_state(["workloadStates"])),
        HELLO,
    ]),
    "bad_version_then_more": (0x07, [3, 1], [ld(1, ld(2, "2.0.0")), HELLO]),
    "oversized_prefix": (0x03, [0, 7], [HELLO]),
    "star_rules_update": (0x0F, [31], [
        HELLO,
        request("u1", 2, update_config("x", "y")),
        request("u2", 3, complete_state([])),
    ]),
}


def control_interface_frames():
    for name, (config, sizes, messages) in SEEDS.items():
        stream = b"".join(frame(m) for m in messages)
        if name == "oversized_prefix":
            stream += varint(1 << 40)
        yield name, bytes([config, len(sizes) - 1, *sizes]) + stream


MANIFESTS = {
    "sample": """apiVersion: v1
workloads:
  hello:
    runtime: podman
    agent: agent_A
    restartPolicy: NEVER
    tags:
      purpose: demo
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: ["sleep", "1000000"]
""",
    "every_field": """apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: agent_A
    restartPolicy: ALWAYS
    runtimeConfig: |
      image: db
      commandOptions: [--name, db1]
  web:
    runtime: podman-kube
    agent: agent_B
    restartPolicy: ON_FAILURE
    dependencies:
      db: ADD_COND_RUNNING
    tags: {tier: front}
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: ReadWrite
          filterMasks: [desiredState.workloads.web, "workloadStates.*"]
        - type: LogRule
          workloadNames: [db]
      denyRules:
        - {type: StateRule, operation: Write, filterMasks: [desiredState.configs]}
    files:
      - mountPoint: /etc/web.conf
        data: "port=80"
      - mountPoint: /bin/x
        binaryData: AAEC
    runtimeConfig: |
      manifest: |
        apiVersion: v1
        kind: Pod
        metadata: {name: web}
  later:
    runtime: podman
    agent: ""
    runtimeConfig: "image: x"
""",
    "templates": """apiVersion: v1
workloads:
  app:
    runtime: podman
    agent: "{{where.agent}}"
    configs:
      where: placement
      p: ports
    files:
      - mountPoint: /p
        data: "{{p.web}}"
    runtimeConfig: |
      image: x
      commandOptions: [-p, "{{p.web}}:80"]
      commandArgs:
        {{> indent content=p.args}}
configs:
  placement:
    agent: agent_A
  ports:
    web: "8080"
    args: ["a", "b"]
""",
    "v01": """apiVersion: v0.1
workloads:
  nginx:
    runtime: podman
    agent: agent_A
    tags:
      - key: owner
        value: me
    controlInterfaceAccess:
      allowRules:
        - type: StateRule
          operation: Read
          filterMask: ["desiredState"]
    runtimeConfig: |
      image: busybox
""",
    "anchors_and_cycle": """apiVersion: v1
workloads:
  a: &w
    runtime: podman
    agent: agent_A
    dependencies: {b: ADD_COND_SUCCEEDED}
    runtimeConfig: "image: a"
  b:
    <<: *w
    dependencies: {a: ADD_COND_FAILED}
""",
    "wrong_version": "apiVersion: v2\nworkloads: {}\n",
    "broken": "apiVersion: v1\nworkloads:\n  a: [\n",
}


def manifest_parser():
    for name, text in MANIFESTS.items():
        yield name, text.encode()


def workload(agent=None, runtime=None, config=None, deps=None, tags=None, policy=None):
    out = b""
    if agent is not None:
        out += ld(1, agent)
    if policy is not None:
        out += b"\x10" + varint(policy)
    if deps is not None:
        out += ld(3, b"".join(ld(1, ld(1, k) + b"\x10" + varint(v)) for k, v in deps.items()))
    if tags is not None:
        out += ld(4, b"".join(ld(1, ld(1, k) + ld(2, v)) for k, v in tags.items()))
    if runtime is not None:
        out += ld(5, runtime)
    if config is not None:
        out += ld(6, config)
    return out


def state(workloads=None, configs=None, version="v1"):
    out = ld(1, version)
    if workloads is not None:
        out += ld(2, b"".join(ld(1, ld(1, k) + ld(2, w)) for k, w in workloads.items()))
    if configs is not None:
        items = b"".join(ld(1, ld(1, k) + ld(2, ld(1, v))) for k, v in configs.items())
        out += ld(3, items)
    return out


def update_request(desired, masks, agents=None):
    new_state = ld(1, desired)
    if agents is not None:
        new_state += ld(3, b"".join(ld(1, ld(1, a) + ld(2, ld(2, ld(1, ld(1, k) + ld(2, v)))))
                                    for a, (k, v) in agents.items()))
    return ld(1, new_state) + b"".join(ld(2, m) for m in masks)


def state_update_masks():
    web = workload("agent_A", "podman", "image: web", deps={"db": 0}, tags={"t": "1"}, policy=2)
    yield "add_one_to_empty", bytes([0]) + update_request(
        state({"web": web, "db": workload("agent_A", "podman", "image: db")}),
        ["desiredState.workloads.web", "desiredState.workloads.db"])
    yield "delete_and_change_field", bytes([1]) + update_request(
        state({"db": workload(agent="agent_B")}),
        ["desiredState.workloads.web", "desiredState.workloads.db.agent", "desiredState.workloads.idle.tags.x"])
    yield "replace_everything", bytes([1]) + update_request(state({"solo": workload("", "podman", "image: s")}), [])
    yield "config_change", bytes([2]) + update_request(
        state(configs={"placement": "agent_C"}), ["desiredState.configs.ports", "desiredState.configs"])
    yield "agent_tags_only", bytes([2]) + update_request(state(), ["agents.agent_A.tags"], {"agent_A": ("k", "v")})
    yield "v01_and_wildcard", bytes([1]) + update_request(
        state(version="v0.1"), ["desiredState.workloads.*", "desiredState", "desiredState.apiVersion"])


def instance(name, agent, id_="1"):
    return ld(1, name) + ld(2, agent) + ld(3, id_)


def execution_state(field, value, info="info"):
    return ld(1, info) + bytes([field << 3]) + varint(value)


def grpc_domain_decode():
    to_server = {
        "agent_hello": ld(1, ld(1, "agent_A") + ld(2, "1.0.0") + ld(3, ld(1, ld(1, "k") + ld(2, "v")))),
        "workload_states": ld(2, ld(1, ld(1, instance("web", "agent_A")) + ld(2, execution_state(3, 8)))
                              + ld(1, ld(1, instance("db", "agent_A")) + ld(2, execution_state(7, 2)))),
        "update_state": ld(3, ld(1, "r1") + ld(2, update_request(
            state({"web": workload("agent_A", "podman", "image: web", deps={"db": 1})},
                  configs={"c": "v"}), ["desiredState.workloads.web"]))),
        "complete_state_request": ld(3, ld(1, "r2") + ld(3, ld(1, "desiredState.workloads.*.agent")
                                                             + ld(1, "workloadStates") + b"\x10\x01")),
        "logs_request": ld(3, ld(1, "r3") + ld(4, ld(1, instance("web", "agent_A")) + b"\x10\x01\x18\x0a")),
        "load_status": ld(5, ld(1, "agent_A") + ld(2, b"\x08\x32") + ld(3, b"\x08\x80\x80\x04")),
        "log_entries": ld(7, ld(1, "r3") + ld(2, ld(1, ld(1, instance("web", "agent_A")) + ld(2, "line")))),
        "logs_stop": ld(8, ld(1, "r3") + ld(2, ld(1, instance("web", "agent_A")))),
    }
    for name, msg in to_server.items():
        yield "to_server_" + name, bytes([0]) + msg
    added = ld(1, instance("web", "agent_A", "abc")) + ld(2, workload(
        "agent_A", "podman", "image: web\ncommandArgs: [sleep, '1']", deps={"db": 0}, policy=1))
    deleted = ld(1, instance("db", "agent_A", "def")) + ld(2, ld(1, "web") + b"\x10\x01")
    complete = ld(1, state({"web": workload("agent_A", "podman", "image: w")}, configs={"c": "v"}))
    complete += ld(2, ld(1, ld(1, "agent_A") + ld(2, ld(1, ld(1, "web") + ld(2, ld(1, ld(1, "abc") + ld(
        2, execution_state(4, 0))))))))
    from_server = {
        "server_hello": ld(4, ld(1, added)),
        "update_workload": ld(1, ld(1, added) + ld(2, deleted)),
        "workload_states": ld(2, ld(1, ld(1, instance("web", "agent_A")) + ld(2, execution_state(5, 2)))),
        "complete_state_event": ld(3, ld(1, "r1") + ld(4, ld(1, complete) + ld(2, ld(1, "desiredState")))),
        "update_success": ld(3, ld(1, "r2") + ld(5, ld(1, "web.abc.agent_A") + ld(2, "db.def.agent_A"))),
        "logs_request": ld(5, ld(1, "cli@r3") + ld(2, ld(1, instance("web", "agent_A")) + ld(4, "10m"))),
        "logs_cancel": ld(6, ld(1, "cli@r3")),
    }
    for name, msg in from_server.items():
        yield "from_server_" + name, bytes([1]) + msg


# Message templates of grpc_stream_sequences (see its fuzz_targets file).
AGENT_HELLO, COMMANDER_HELLO, DELETE_ALL, ADD, READ, LOGS, LOGS_CANCEL, EVENTS_CANCEL, RERUN, INTERRUPT, \
    STATES, LOAD, ENTRIES, STOP, GOODBYE, RENDERED = range(16)
AGENT, CLI, COMMAND = 0, 1, 2
ADMIN_CERT = 4


def grpc_stream_sequences():
    def seq(flags, streams, steps):
        return bytes([flags, len(streams) - 1, *streams] + [b for step in steps for b in step])
    # a commander writes first, then says hello; a second stream is well-behaved
    yield "write_before_hello", seq(0, [COMMAND, CLI], [
        (0, DELETE_ALL, 0), (0, COMMANDER_HELLO, 0), (1, COMMANDER_HELLO, 0), (1, READ, 0)])
    # read-only clients over TLS try every write, and to be an agent
    yield "read_only_writes", seq(5, [CLI, COMMAND, AGENT], [
        (0, COMMANDER_HELLO, 0), (0, DELETE_ALL, 1), (0, RERUN, 0), (0, INTERRUPT, 1), (1, COMMANDER_HELLO, 0),
        (1, ADD, 1), (2, AGENT_HELLO, 0), (2, STATES, 0)])
    # agent_A's certificate says hello as agent_A, then as agent_B
    yield "later_hello", seq(4, [AGENT, AGENT], [
        (0, AGENT_HELLO, 0), (0, AGENT_HELLO, 1), (1, AGENT_HELLO, 1), (0, READ, 0)])
    # a commander asks for logs; another commander and an agent forge lines under guessed keys
    yield "log_injection", seq(0, [AGENT, AGENT, COMMAND, COMMAND], [
        (0, AGENT_HELLO, 0), (1, AGENT_HELLO, 1), (2, COMMANDER_HELLO, 0), (3, COMMANDER_HELLO, 0),
        (2, LOGS, 1), (3, ENTRIES, 3), (1, ENTRIES, 3), (0, ENTRIES, 3), (1, STOP, 3), (2, LOGS_CANCEL, 1)])
    # roles on: the admin certificate as an agent, agent_A's as a commander
    yield "roles", seq(6, [AGENT | ADMIN_CERT, COMMAND], [
        (0, AGENT_HELLO, 0), (1, COMMANDER_HELLO, 0), (1, READ, 1), (1, EVENTS_CANCEL, 1), (1, GOODBYE, 0)])


def config_templates():
    """The review's attack templates and ordinary ones."""
    chained = '{{#*inline "p0"}}x{{/inline}}' + "".join(
        '{{#*inline "p%d"}}{{> p%d}}{{> p%d}}{{/inline}}' % (n, n - 1, n - 1) for n in range(1, 24)
    ) + "{{> p23}}"
    yield "plain", b"image: x\ncommandOptions: [-e, '{{c.s}}']"
    yield "helpers", b"o: [{{yaml c.s}}, {{json c.l}}, {{yaml c.m}}]"
    yield "loops", b"{{#each c.l}}{{@index}}={{this}} {{#each ../c.l}}.{{/each}}{{/each}}"
    yield "indent", b"k:\n  {{> indent content=c.s}}\n"
    yield "conditions", b"{{#if c.s}}{{#with c.m}}{{k}}{{/with}}{{else}}no{{/if}}{{lookup c.l 1}}"
    yield "recursive", b'{{#*inline "a"}}{{> b}}{{/inline}}{{#*inline "b"}}{{> a}}{{/inline}}{{> a}}'
    yield "chained", chained.encode()
    yield "deep", b"{{#if c.s}}" * 70 + b"{{/if}}" * 70
    yield "with_item", b"{{c.k}} {{json c}}\0{k: \"v\\\"w\", l: [\"\\n\"]}"


TARGETS = {
    "control_interface_frames": control_interface_frames,
    "manifest_parser": manifest_parser,
    "state_update_masks": state_update_masks,
    "grpc_domain_decode": grpc_domain_decode,
    "grpc_stream_sequences": grpc_stream_sequences,


    "config_templates": config_templates,
}


def main():
    for target, seeds in TARGETS.items():
        out = pathlib.Path(__file__).parent / "seeds" / target
        out.mkdir(parents=True, exist_ok=True)
        for name, data in seeds():
            (out / name).write_bytes(data)


if __name__ == "__main__":
    main()
