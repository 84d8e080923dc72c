"""Manifests of N busybox workloads for one agent, in Ankaios' v1 format, the same text
for both implementations: every tenth workload (index 5, 15, ...) waits for the one five
before it to be running, and each carries the envelope's `--cgroup-parent`."""
import os


def workload(name, agent, gen, runtime="podman", restart="NEVER", deps=None, cgroup_parent=None):
    opts = []
    if cgroup_parent and runtime == "podman":
        opts.append(f"--cgroup-parent={cgroup_parent}")
    lines = [f"  {name}:", f"    runtime: {runtime}", f"    agent: {agent}",
             f"    restartPolicy: {restart}"]
    if deps:
        lines.append("    dependencies:")
        lines += [f"      {d}: ADD_COND_RUNNING" for d in deps]
    lines += ["    runtimeConfig: |", "      image: localhost/busybox:latest"]
    if opts:
        lines.append("      commandOptions: [" + ", ".join(f'"{o}"' for o in opts) + "]")
    # The generation is part of the command, so a new one replaces every container. The
    # shell ends at SIGTERM (a bare `sleep` as PID 1 ignores it and every stop would wait
    # out podman's 10 s before SIGKILL).
    lines.append(f'      commandArgs: ["sh", "-c", "trap \'exit 0\' TERM; sleep {100000 + gen} & wait"]')
    return "\n".join(lines)


def names(n):
    return [f"wl{i:03d}" for i in range(n)]


def text(n, agent, gen=0, extra=(), **kw):
    """`extra`: (name, gen) of further workloads (the power cut's additions)."""
    out = ["apiVersion: v1", "workloads:"]
    for i, name in enumerate(names(n)):
        deps = [f"wl{i - 5:03d}"] if i % 10 == 5 else None
        out.append(workload(name, agent, gen, deps=deps, **kw))
    for name, g in extra:
        out.append(workload(name, agent, g, **kw))
    return "\n".join(out) + "\n"


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content)
    return path
