"""The timed scenarios, each one round for one implementation: cold boot with a startup
manifest, a burst apply / update / delete of N workloads, idle with N running, and a
server restart with N running. Each returns {metric: value}; times in seconds."""
import os
import shutil
import signal
import tempfile
import time

from . import envelope as envmod
from . import manifests
from . import pageout
from .system import System

POLL = 0.1


class Ctx:
    """What every scenario needs: the envelope, the options, a scratch folder."""

    def __init__(self, env, args, scratch):
        self.env = env
        self.args = args
        self.scratch = scratch
        self.agent = args.agent_name

    def system(self, name, bins, runtime="podman", state_file=False, agent_args=()):
        wd = tempfile.mkdtemp(prefix=f"{name}-", dir=self.scratch)
        ns = self.env.name if runtime == "containerd" else None
        s = System(name, bins, self.env, wd, self.agent, runtime=runtime,
                   state_file=state_file, containerd_namespace=ns)
        s.agent_args = list(agent_args)
        return s

    def manifest(self, s, n, gen=0, restart="NEVER", extra=()):
        text = manifests.text(n, self.agent, gen, extra=extra, runtime=s.runtime,
                              restart=restart, cgroup_parent=self.env.cgroup_parent())
        tag = "".join(f"-{name}{g}" for name, g in extra)
        return manifests.write(os.path.join(s.workdir, f"m{n}-{gen}-{restart}{tag}.yaml"), text)


def all_running(states, names, old_ids=None):
    if states is None:
        return False
    for n in names:
        entries = states.get(n)
        if not entries or len(entries) != 1:
            return False
        wid, st, sub = entries[0]
        if (st, sub) != ("Running", "Ok"):
            return False
        if old_ids and old_ids.get(n) == wid:
            return False
    return True


def wait(pred, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(POLL)
    return None


STALL_S = 45


def wait_running(s, names, timeout, old_ids=None):
    """Seconds until all `names` are Running(Ok) (with a new id when `old_ids`), or None at
    `timeout` or when no workload got there for STALL_S seconds (a create retried forever)."""
    t0 = last_change = time.monotonic()
    best = -1
    while time.monotonic() - t0 < timeout:
        states = s.states()
        if all_running(states, names, old_ids):
            return time.monotonic() - t0
        done = sum(1 for n in names if all_running(states, [n], old_ids))
        if done > best:
            best, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > STALL_S:
            print(f"  {s.name}: stalled at {best}/{len(names)} Running(Ok)", flush=True)
            return None
        time.sleep(POLL)
    print(f"  {s.name}: {best}/{len(names)} Running(Ok) at the timeout", flush=True)
    return None


def finish(s, manifest=None):
    """Stops the daemons and removes the run's containers. On containerd the agent deletes
    them first (with `manifest`), so that their network addresses are released too."""
    if s.runtime == "containerd" and manifest and s.server and s.agent:
        s.apply(manifest, delete=True)
        wait(lambda: s.states() == {}, 120)
    s.stop()
    s.remove_containers()


def _env_cpu(ctx):
    return ctx.env.cpu_ns()


def _env_cpu_s(ctx, before):
    after = ctx.env.cpu_ns()
    return None if before is None or after is None else (after - before) / 1e9


def cold_boot(ctx, name, bins, n, runtime="podman"):
    s = ctx.system(name, bins, runtime)
    m = ctx.manifest(s, n)
    envmod.drop_caches()
    ctx.env.reset_memory_peak()
    oom0 = ctx.env.oom_kills()
    c0 = _env_cpu(ctx)
    t0 = time.monotonic()
    s.start_server(m)
    s.start_agent()
    names = manifests.names(n)
    t = wait_running(s, names, ctx.args.timeout)
    out = {f"cold_boot_{n}_s": (time.monotonic() - t0) if t is not None else None,
           f"cold_boot_{n}_envelope_cpu_s": _env_cpu_s(ctx, c0),
           f"cold_boot_{n}_envelope_peak_mb": _mb(ctx.env.memory_peak()),
           f"cold_boot_{n}_oom_kills": ctx.env.oom_kills() - oom0}
    finish(s, m)
    return out


def burst(ctx, name, bins, n, runtime="podman", idle_s=30, agent_args=(), tag="burst"):
    """Apply N, idle, update all N, delete all N."""
    s = ctx.system(name, bins, runtime, agent_args=agent_args)
    s.start_server()
    s.start_agent()
    if wait(lambda: s.states() is not None, 30) is None:
        finish(s)
        raise RuntimeError(f"{name}: the server did not answer")
    time.sleep(1)
    names = manifests.names(n)
    out = {}
    oom0 = ctx.env.oom_kills()
    ctx.env.reset_memory_peak()
    c0 = _env_cpu(ctx)
    t0 = time.monotonic()
    r = s.apply(ctx.manifest(s, n, gen=0))
    if r.returncode != 0:
        raise RuntimeError(f"{name}: apply failed: {r.stderr}")
    t = wait_running(s, names, ctx.args.timeout)
    out[f"{tag}_apply_{n}_s"] = time.monotonic() - t0 if t is not None else None
    out[f"{tag}_apply_{n}_envelope_cpu_s"] = _env_cpu_s(ctx, c0)
    out[f"{tag}_apply_{n}_envelope_peak_mb"] = _mb(ctx.env.memory_peak())
    if t is None:
        # Nothing to measure after an apply that did not finish.
        out[f"{tag}_{n}_oom_kills"] = ctx.env.oom_kills() - oom0
        finish(s)
        return out
    if idle_s:
        out.update(idle(ctx, s, n, idle_s))
    if tag == "burst":
        before = {w: e[0][0] for w, e in (s.states() or {}).items() if e}
        c0 = _env_cpu(ctx)
        t0 = time.monotonic()
        s.apply(ctx.manifest(s, n, gen=1))
        t = wait_running(s, names, ctx.args.timeout, before)
        out[f"update_{n}_s"] = time.monotonic() - t0 if t is not None else None
        out[f"update_{n}_envelope_cpu_s"] = _env_cpu_s(ctx, c0)
        t0 = time.monotonic()
        s.apply(ctx.manifest(s, n, gen=1), delete=True)
        t = wait(lambda: s.states() == {}, ctx.args.timeout)
        out[f"delete_{n}_s"] = time.monotonic() - t0 if t is not None else None
        left = wait(lambda: not s.containers(), 60)
        out[f"delete_{n}_containers_left"] = 0 if left is not None else len(s.containers())
    out[f"{tag}_{n}_oom_kills"] = ctx.env.oom_kills() - oom0
    finish(s)
    return out


def bring_up(ctx, s, n, batch, restart="NEVER"):
    """Applies the first `batch`, 2 x `batch`, ... workloads of N, each step until all
    are Running(Ok): a node that cannot take N creates at once still gets there."""
    for k in range(batch, n + batch, batch):
        k = min(k, n)
        s.apply(ctx.manifest(s, k, restart=restart))
        if wait_running(s, manifests.names(k), ctx.args.timeout) is None:
            return False
    return True


def idle_scenario(ctx, name, bins, n, secs, batch):
    """N running (brought up in batches), then idle: CPU and PSS."""
    s = ctx.system(name, bins)
    s.start_server()
    s.start_agent()
    wait(lambda: s.states() is not None, 30)
    out = {}
    if bring_up(ctx, s, n, batch):
        out = idle(ctx, s, n, secs)
    finish(s)
    return out


def idle(ctx, s, n, secs):
    time.sleep(5)
    srv0, ag0 = _ticks(s.server), _ticks(s.agent)
    tree0 = s.cpu_ticks_of(s.server) + s.cpu_ticks_of(s.agent)
    c0 = _env_cpu(ctx)
    pss, anon = [], []
    t0 = time.monotonic()
    while time.monotonic() - t0 < secs:
        pss.append(s.pss_kb())
        anon.append(s.pss_anon_kb())
        time.sleep(min(5, secs / 3))
    dt = time.monotonic() - t0
    hz = os.sysconf("SC_CLK_TCK")
    env_cpu = _env_cpu_s(ctx, c0)
    daemons = sorted(p[0] for p in pss)[len(pss) // 2]
    trees = sorted(p[1] for p in pss)[len(pss) // 2]
    return {
        f"idle_{n}_server_cpu_pct": 100 * (_ticks(s.server) - srv0) / hz / dt,
        f"idle_{n}_agent_cpu_pct": 100 * (_ticks(s.agent) - ag0) / hz / dt,
        f"idle_{n}_tree_cpu_pct": 100 * (s.cpu_ticks_of(s.server) + s.cpu_ticks_of(s.agent)
                                         - tree0) / hz / dt,
        f"idle_{n}_envelope_cpu_pct": None if env_cpu is None else 100 * env_cpu / dt,
        f"idle_{n}_daemons_pss_mb": daemons / 1024,
        f"idle_{n}_tree_pss_mb": trees / 1024,
        f"idle_{n}_daemons_pss_anon_mb": sorted(anon)[len(anon) // 2] / 1024,
        **working_set(s, n, secs),
    }


def working_set(s, n, secs):
    """The daemons' PSS once the kernel took back what they do not use: both paged out
    the same way, then `secs` more of idle, then sampled (the median of 3)."""
    for p in s.daemon_pids():
        pageout.page_out(p)
    time.sleep(secs)
    samples = []
    for _ in range(3):
        samples.append(s.pss_kb()[0])
        time.sleep(2)
    return {f"idle_{n}_daemons_pss_working_set_mb": sorted(samples)[1] / 1024}


def _ticks(p):
    from .system import cpu_ticks
    return cpu_ticks(p.pid) if p else 0


def server_restart(ctx, name, bins, n, batch, sig=signal.SIGTERM):
    """N running (brought up in batches; ours with --state-file), the server restarted
    with a startup manifest of the same N: until every state is reported again, and how
    many containers changed (must be 0)."""
    s = ctx.system(name, bins, state_file=(name != "ref"))
    m = ctx.manifest(s, n)
    s.start_server()
    s.start_agent()
    wait(lambda: s.states() is not None, 30)
    names = manifests.names(n)
    out = {}
    if not bring_up(ctx, s, n, batch):
        finish(s)
        return {f"server_restart_{n}_s": None}
    time.sleep(2)
    before = {c[1]: (c[0], c[3]) for c in s.containers()}
    s.server.send_signal(sig)
    s.server.wait(timeout=30)
    t0 = time.monotonic()
    s.start_server(m)
    t = wait_running(s, names, ctx.args.timeout)
    out[f"server_restart_{n}_s"] = time.monotonic() - t0 if t is not None else None
    # Listed with the daemons stopped (both leave their workloads running at SIGTERM): an
    # agent polling podman for each of 100 workloads can keep a `podman ps` waiting longer
    # than its timeout.
    time.sleep(2)
    s.stop()
    after = {c[1]: (c[0], c[3]) for c in s.containers()}
    out[f"server_restart_{n}_restarts"] = sum(1 for k, v in before.items() if after.get(k) != v) \
        + sum(1 for k in after if k not in before)
    finish(s)
    return out


def _mb(b):
    return None if b is None else b / (1 << 20)


def clean_scratch(path):
    shutil.rmtree(path, ignore_errors=True)
