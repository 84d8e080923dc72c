# Runs inside a podman workload under our agent and drives the official
# Ankaios Python SDK (ankaios-sdk from PyPI, unchanged) through the control
# interface. Each step prints "ok <step>"; the first failure prints
# "FAIL <step>: <error>" and exits 1; "ALL OK" and exit 0 at the end.
# Usage: python3 sdk_conformance.py AGENT_NAME [reconnect]
# (the workload is named "sdk"). With "reconnect" it only connects, prints
# "waiting for an agent restart", and passes once a request failed while
# the agent was away and a later one succeeded again.

import sys
import time
import traceback

from ankaios_sdk import (
    Ankaios,
    AnkaiosResponseError,
    LogEntry,
    Manifest,
    WorkloadStateEnum,
)

AGENT = sys.argv[1]
CHILD_CONFIG = (
    "image: localhost/busybox:latest\n"
    "commandArgs: [sh, -c, 'trap \"exit 0\" TERM; echo {greeting}; sleep 3600 & wait']\n"
)


def child_manifest(greeting):
    return Manifest.from_dict(
        {
            "apiVersion": "v1",
            "workloads": {
                "child": {
                    "runtime": "podman",
                    "agent": AGENT,
                    "restartPolicy": "NEVER",
                    "runtimeConfig": CHILD_CONFIG.format(greeting=greeting),
                }
            },
        }
    )


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def wait_for(predicate, what, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def step(name, action):
    try:
        result = action()
    except Exception as e:  # noqa: BLE001 - report any failure of the step
        traceback.print_exc()
        print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
    print(f"ok {name}", flush=True)
    return result


def expect_denied(action, what):
    try:
        action()
    except AnkaiosResponseError as e:
        return str(e)
    raise AssertionError(f"{what} was not denied")


ank = step("connect", Ankaios)


def survive_agent_restart():
    ank.get_state(["workloadStates"])
    print("waiting for an agent restart", flush=True)
    failed = False
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            ank.get_state(["workloadStates"], timeout=2)
        except Exception as e:  # noqa: BLE001 - any failure means the agent is away
            if not failed:
                print(f"agent away: {type(e).__name__}: {e}", flush=True)
            failed = True
        else:
            if failed:
                return
        time.sleep(0.3)
    raise AssertionError("no agent restart seen" if not failed else "not reconnected")


if len(sys.argv) > 2 and sys.argv[2] == "reconnect":
    step("reconnect after an agent restart", survive_agent_restart)
    print("ALL OK", flush=True)
    sys.exit(0)


def complete_state():
    state = ank.get_state(["desiredState", "workloadStates"])
    names = [w.name for w in state.get_workloads()]
    check("sdk" in names, f"own workload not in {names}")
    states = [s.workload_instance_name.workload_name for s in state.get_workload_states().get_as_list()]
    check("sdk" in states, f"own state not in {states}")


step("get complete state", complete_state)


def apply_child():
    ret = ank.apply_manifest(child_manifest("hello-from-child"))
    check(len(ret.added_workloads) == 1, f"added: {ret.to_dict()}")
    return ret.added_workloads[0]


child = step("apply manifest adding a workload", apply_child)
step(
    "wait for it to run",
    lambda: ank.wait_for_workload_to_reach_state(child, WorkloadStateEnum.RUNNING, timeout=30),
)


def execution_state():
    state = ank.get_execution_state_for_instance_name(child)
    check(state is not None and state.state == WorkloadStateEnum.RUNNING, f"state: {state}")


step("read its execution state", execution_state)


def logs():
    campaign = ank.request_logs([child], follow=True)
    names = [n.workload_name for n in campaign.accepted_workload_names]
    check(names == ["child"], f"accepted: {names}")
    deadline = time.time() + 15
    while True:
        entry = campaign.queue.get(timeout=max(0.1, deadline - time.time()))
        if isinstance(entry, LogEntry) and "hello-from-child" in entry.message:
            break
    ank.stop_receiving_logs(campaign)


step("request logs", logs)

events = step("register for events", lambda: ank.register_event(["desiredState.workloads.child"]))


def first_event_is_current_state():
    entry = events.get(timeout=5)
    check([w.name for w in entry.complete_state.get_workloads()] == ["child"], str(entry))


step("event subscription starts with the current state", first_event_is_current_state)


def change_child():
    ret = ank.apply_manifest(child_manifest("hello-again"))
    check(len(ret.added_workloads) == 1 and len(ret.deleted_workloads) == 1, f"changed: {ret.to_dict()}")
    new = ret.added_workloads[0]
    check(new.workload_id != child.workload_id, "the instance id did not change")
    ank.wait_for_workload_to_reach_state(new, WorkloadStateEnum.RUNNING, timeout=30)
    entry = events.get(timeout=10)
    fields = list(entry.updated_fields) + list(entry.added_fields)
    check(any(f.startswith("desiredState.workloads.child") for f in fields), f"event: {entry}")
    ank.unregister_event(events)


step("change a workload and see its event", change_child)


def unwrap(result):
    # SDK 1.0.1 returns (configs, timeout) from get_configs and get_config.
    return result[0] if isinstance(result, tuple) else result


def configs():
    ank.update_configs({"greeting": "hi", "settings": {"level": "3"}})
    got = unwrap(ank.get_configs())
    check(got == {"greeting": "hi", "settings": {"level": "3"}}, f"configs: {got}")
    one = unwrap(ank.get_config("greeting"))
    check(one == {"greeting": "hi"}, f"config: {one}")


step("set and read configs", configs)


def delete_child():
    ank.delete_workload("child")
    wait_for(lambda: ank.get_workload("child") == [], "child to leave the desired state")


step("delete a workload", delete_child)


def denied():
    reason = expect_denied(lambda: ank.delete_workload("sdk"), "deleting itself")
    check("Access denied" in reason, f"reason: {reason}")
    expect_denied(ank.get_agents, "reading the agents")


step("denied requests fail", denied)
print("ALL OK", flush=True)
