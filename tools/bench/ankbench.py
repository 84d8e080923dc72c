#!/usr/bin/env python3
"""ankbench - black-box benchmark for Ankaios-CLI-compatible orchestrators.

Drives a server binary, one agent binary and an `ank`-compatible CLI binary
purely through their command lines and podman. Nothing here depends on the
implementation language or internals of the system under test; only on:
  * server:  <server> --insecure --address HOST:PORT          (overridable)
  * agent:   <agent> --insecure --name NAME --server-url URL --run-folder DIR
  * cli:     <cli> --insecure --server-url URL {get state|get agents|
                   get workloads|apply FILE}
  * `get workloads` printing a table whose rows start with the workload
    name and contain an execution state token like `Running(Ok)`.
  * manifests in Ankaios apiVersion v1 format, runtime `podman`.

Usage:
  ankbench.py --server BIN --agent BIN --cli BIN [--reps 5] [--tests LIST]
  (or env ANK_SERVER_BIN / ANK_AGENT_BIN / ANK_CLI_BIN)

Tests (default all): podman_floor,startup,idle0,startup_seq,deploy1,
                     deploy20(+idle20),update,update_trap,fail,chain_run,
                     chain_succ
  podman_floor needs no orchestrator: 10x `podman run -d IMAGE sleep 1000`.
Only this tool's containers (its agent's and its podman_floor ones) are
inspected and removed; other containers on the machine are left alone.
Output: RAW lines per sample, then a SUMMARY table (median/min/max, seconds
unless the metric name says otherwise). --json FILE also writes all samples.
"""
import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
STATE_PREFIXES = ("Running", "Pending", "Succeeded", "Failed", "Stopping",
                  "Removed", "AgentDisconnected", "NotScheduled", "Unknown",
                  "Starting", "Waiting")


# ----------------------------------------------------------------- helpers
def log(*a):
    print(*a, flush=True)


def sh(cmd, timeout=60, check=False):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {r.stderr}")
    return r


def parse_podman_time(s):
    """podman inspect time -> epoch float (handles ns fractions and tz)."""
    if not s or s.startswith("0001-"):
        return None
    s = s.strip().replace("Z", "+00:00")
    # split off fraction to at most 6 digits
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, tz = rest[:i], rest[i:]
        s = head + "." + (frac[:6].ljust(6, "0")) + tz
    # podman may print "+0000 UTC"-style in some versions
    s = s.split(" ")[0]
    return dt.datetime.fromisoformat(s).timestamp()


# Only the containers this tool made are looked at and removed: those of its
# agent (podman names them WORKLOAD.ID.AGENT) and its podman_floor runs (this
# label); other containers on the machine are left alone.
FLOOR_LABEL = "ankbench=floor"
OWN = {"agent": "ankbench"}


def own_container_ids():
    r = sh(["podman", "ps", "-a", "--no-trunc", "--format",
            "{{.ID}} {{.Names}} {{.Labels}}"])
    ids = []
    for line in r.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 2:
            continue
        labels = parts[2] if len(parts) > 2 else ""
        if parts[1].endswith("." + OWN["agent"]) or FLOOR_LABEL.replace("=", ":") in labels:
            ids.append(parts[0])
    return ids


def podman_containers():
    """podman inspect dicts of this tool's containers (infra excluded)."""
    ids = own_container_ids()
    if not ids:
        return []
    r = sh(["podman", "inspect", "--type", "container"] + ids)
    try:
        data = json.loads(r.stdout or "[]")
    except json.JSONDecodeError:
        return []
    return [c for c in data if not c.get("IsInfra")]


def podman_cleanup():
    ids = own_container_ids()
    if ids:
        sh(["podman", "rm", "-f", "-t", "0"] + ids, timeout=180)


def proc_cpu_ticks(pid):
    """(self ticks, self+reaped-children ticks) of pid."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    ut, st, cut, cst = (int(x) for x in fields[11:15])
    return ut + st, ut + st + cut + cst


def proc_pss_kb(pid):
    pss = rss = None
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
    return pss, rss


def proc_tree(pid):
    """pid plus all descendants (current snapshot)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
            ppid = int(s[s.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def system_busy_ticks():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


# ------------------------------------------------------------ the cluster
class Cluster:
    def __init__(self, a):
        self.a = a
        self.addr = f"127.0.0.1:{a.port}"
        self.url = f"http://{self.addr}"
        self.server = self.agent = None
        self.run_folder = os.path.join(a.workdir, "agent-run")
        self.logdir = os.path.join(a.workdir, "logs")
        os.makedirs(self.logdir, exist_ok=True)
        self.cli_times = []
        self.seq = 0

    def fmt(self, tmpl):
        return shlex.split(tmpl.format(
            server=self.a.server, agent=self.a.agent, cli=self.a.cli,
            addr=self.addr, url=self.url, name=self.a.agent_name,
            run_folder=self.run_folder))

    def start(self, agent_after=None):
        """Launch server+agent together; with agent_after (callable) the
        agent is launched only after agent_after() returns."""
        shutil.rmtree(self.run_folder, ignore_errors=True)
        os.makedirs(self.run_folder)
        self.seq += 1
        so = open(os.path.join(self.logdir, f"server.{self.seq}.log"), "w")
        ao = open(os.path.join(self.logdir, f"agent.{self.seq}.log"), "w")
        t0 = time.time()
        self.server = subprocess.Popen(self.fmt(self.a.server_cmd),
                                       stdout=so, stderr=subprocess.STDOUT)
        if agent_after:
            agent_after()
            t0 = time.time()
        self.agent = subprocess.Popen(self.fmt(self.a.agent_cmd),
                                      stdout=ao, stderr=subprocess.STDOUT)
        return t0

    def stop(self):
        for p in (self.agent, self.server):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (self.agent, self.server):
            if p:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.server = self.agent = None
        podman_cleanup()

    def cli(self, *args, timeout=30):
        cmd = self.fmt(self.a.cli_cmd) + list(args)
        t = time.time()
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               timeout=timeout)
            rc, out = r.returncode, r.stdout
        except subprocess.TimeoutExpired:
            rc, out = 124, ""
        d = time.time() - t
        self.cli_times.append(d)
        return rc, out, time.time()

    def apply_bg(self, manifest_text):
        """Start `cli apply FILE` in background; returns (t0, holder)."""
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.a.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(manifest_text)
        holder = {}
        cmd = self.fmt(self.a.cli_cmd) + ["apply", path]

        def run():
            r = subprocess.run(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            holder["t_end"] = time.time()
            holder["rc"] = r.returncode
            holder["out"] = r.stdout
        t0 = time.time()
        th = threading.Thread(target=run, daemon=True)
        th.start()
        holder["thread"] = th
        return t0, holder

    def workloads(self):
        """{name: state-token} from `get workloads` (None if CLI failed)."""
        rc, out, t = self.cli("get", "workloads")
        if rc != 0:
            return None, t
        res = {}
        for line in out.splitlines():
            toks = line.replace("|", " ").split()
            if not toks or toks[0].upper() == "WORKLOAD":
                continue
            state = next((x for x in toks[1:]
                          if x.startswith(STATE_PREFIXES)), None)
            if state:
                # several rows for one name (old/new instance): keep all
                res.setdefault(toks[0], []).append(state)
        return res, t

    def wait_for(self, pred, timeout, interval=None):
        """Poll `get workloads` until pred(dict) is true; return obs time."""
        interval = self.a.interval if interval is None else interval
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            wl, t = self.workloads()
            if wl is not None:
                last = wl
                if pred(wl):
                    return t, wl
            time.sleep(interval)
        raise TimeoutError(f"condition not reached; last={last}")


def all_state(names, prefix):
    def p(wl):
        return all(n in wl and all(s.startswith(prefix) for s in wl[n])
                   for n in names)
    return p


# ------------------------------------------------------------- manifests
def wl_yaml(name, agent, image, args, restart="NEVER", deps=None,
            options=None):
    lines = [f"  {name}:", "    runtime: podman", f"    agent: {agent}",
             f"    restartPolicy: {restart}"]
    if deps:
        lines.append("    dependencies:")
        lines += [f"      {d}: {c}" for d, c in deps.items()]
    lines.append("    runtimeConfig: |")
    lines.append(f"      image: {image}")
    if options:
        lines.append(f"      commandOptions: {json.dumps(options)}")
    lines.append(f"      commandArgs: {json.dumps(args)}")
    return "\n".join(lines) + "\n"


def manifest(*wls):
    return "apiVersion: v1\nworkloads:\n" + "".join(wls)


# ------------------------------------------------------------------ bench
class Bench:
    def __init__(self, a):
        self.a = a
        self.c = Cluster(a)
        self.samples = {}

    def rec(self, test, metric, rep, value):
        self.samples.setdefault((test, metric), []).append(value)
        v = f"{value:.4f}" if isinstance(value, float) else value
        log(f"RAW test={test} rep={rep} {metric}={v}")

    def wl(self, name, args, **kw):
        return wl_yaml(name, self.a.agent_name, self.a.image, args, **kw)

    def fresh(self):
        podman_cleanup()
        t0 = self.c.start()
        self.wait_ready(t0, None, 0)
        return t0

    def wait_ready(self, t0, test, rep, timeout=60):
        t_state = None
        while time.time() - t0 < timeout:
            rc, out, t = self.c.cli("get", "state")
            if rc == 0:
                t_state = t
                break
            time.sleep(self.a.interval)
        else:
            raise TimeoutError("server never answered get state")
        while time.time() - t0 < timeout:
            rc, out, t = self.c.cli("get", "agents")
            if rc == 0 and self.a.agent_name in out:
                if test:
                    self.rec(test, "launch_to_get_state_ok_s", rep,
                             t_state - t0)
                    self.rec(test, "launch_to_agent_listed_s", rep, t - t0)
                return
            time.sleep(self.a.interval)
        raise TimeoutError("agent never listed")

    def measure_idle(self, test, rep, secs):
        srv, agt = self.c.server.pid, self.c.agent.pid
        s0, a0 = proc_cpu_ticks(srv), proc_cpu_ticks(agt)
        b0, tot0 = system_busy_ticks()
        t0 = time.time()
        time.sleep(secs)
        s1, a1 = proc_cpu_ticks(srv), proc_cpu_ticks(agt)
        b1, tot1 = system_busy_ticks()
        el = time.time() - t0
        pct = lambda d: 100.0 * d / CLK_TCK / el  # % of one core
        self.rec(test, "server_cpu_pct", rep, pct(s1[0] - s0[0]))
        self.rec(test, "agent_cpu_pct", rep, pct(a1[0] - a0[0]))
        self.rec(test, "agent_cpu_incl_children_pct", rep,
                 pct(a1[1] - a0[1]))
        self.rec(test, "system_busy_pct_of_1core", rep,
                 100.0 * (b1 - b0) / (tot1 - tot0) * os.cpu_count())
        for who, pid in (("server", srv), ("agent", agt)):
            pss, rss = proc_pss_kb(pid)
            self.rec(test, f"{who}_pss_kb", rep, float(pss))
            self.rec(test, f"{who}_rss_kb", rep, float(rss))
        # whole process trees (e.g. helper processes of the agent)
        tree = proc_tree(agt)
        tot = 0
        for p in tree:
            try:
                tot += proc_pss_kb(p)[0] or 0
            except OSError:
                pass
        self.rec(test, "agent_tree_pss_kb", rep, float(tot))
        self.rec(test, "agent_tree_nprocs", rep, float(len(tree)))

    def deploy(self, test, rep, n):
        names = [f"w{i:02d}" for i in range(n)]
        m = manifest(*[self.wl(x, ["sleep", "100000"]) for x in names])
        t0, h = self.c.apply_bg(m)
        t, _ = self.c.wait_for(all_state(names, "Running"), 120)
        self.rec(test, "apply_to_all_running_s", rep, t - t0)
        h["thread"].join(60)
        if "t_end" in h:
            self.rec(test, "apply_cmd_return_s", rep, h["t_end"] - t0)
            if h["rc"] != 0:
                log(f"WARN apply rc={h['rc']}: {h['out'][-500:]}")
        cs = podman_containers()
        st = sorted(filter(None, (parse_podman_time(c["State"]["StartedAt"])
                                  for c in cs)))
        if st:
            self.rec(test, "apply_to_first_container_started_s", rep,
                     st[0] - t0)
            self.rec(test, "apply_to_last_container_started_s", rep,
                     st[-1] - t0)
            self.rec(test, "last_container_started_to_reported_s", rep,
                     t - st[-1])
        self.rec(test, "n_containers", rep, float(len(cs)))

    def update(self, test, rep, trap):
        def args(v):
            if trap:
                return ["sh", "-c",
                        f"trap 'exit 0' TERM; sleep {v} & wait"]
            return ["sleep", str(v)]
        self.c.apply_bg(manifest(self.wl("upd", args(100000))))
        self.c.wait_for(all_state(["upd"], "Running"), 60)
        old = {c["Id"] for c in podman_containers()}
        newtok = "100001"
        t0, h = self.c.apply_bg(manifest(self.wl("upd", args(100001))))

        def done(wl):
            if not all_state(["upd"], "Running")(wl):
                return False
            cs = podman_containers()
            old_running = any(c["Id"] in old and c["State"]["Running"]
                              for c in cs)
            new_running = any(c["Id"] not in old and c["State"]["Running"]
                              and newtok in " ".join(
                                  c.get("Config", {}).get("Cmd") or [])
                              for c in cs)
            return new_running and not old_running
        t, _ = self.c.wait_for(done, 120)
        self.rec(test, "reapply_to_new_running_s", rep, t - t0)
        h["thread"].join(60)
        if "t_end" in h:
            self.rec(test, "apply_cmd_return_s", rep, h["t_end"] - t0)
        cs = podman_containers()
        new = [c for c in cs if c["Id"] not in old]
        if new:
            ts = parse_podman_time(new[0]["State"]["StartedAt"])
            if ts:
                self.rec(test, "reapply_to_new_container_started_s", rep,
                         ts - t0)
                self.rec(test, "new_started_to_reported_s", rep, t - ts)
        for c in cs:
            if c["Id"] in old:
                te = parse_podman_time(c["State"].get("FinishedAt"))
                if te:
                    self.rec(test, "reapply_to_old_container_exit_s", rep,
                             te - t0)

    def fail(self, test, rep):
        m = manifest(self.wl("failer", ["sh", "-c", "sleep 2; exit 1"],
                             restart="NEVER"))
        t0, h = self.c.apply_bg(m)
        t, wl = self.c.wait_for(all_state(["failer"], "Failed"), 60)
        cs = podman_containers()
        fin = [parse_podman_time(c["State"].get("FinishedAt")) for c in cs]
        fin = [x for x in fin if x]
        if fin:
            self.rec(test, "container_exit_to_reported_failed_s", rep,
                     t - max(fin))
        else:
            log("WARN no exited container found to get FinishedAt")
        self.rec(test, "apply_to_reported_failed_s", rep, t - t0)
        log(f"INFO failed state shown as: {wl.get('failer')}")

    def chain(self, test, rep, succ):
        if succ:
            a = self.wl("ca", ["true"])
            b = self.wl("cb", ["sleep", "100000"],
                        deps={"ca": "ADD_COND_SUCCEEDED"})
        else:
            a = self.wl("ca", ["sleep", "100000"])
            b = self.wl("cb", ["sleep", "100000"],
                        deps={"ca": "ADD_COND_RUNNING"})
        c = self.wl("cc", ["sleep", "100000"],
                    deps={"cb": "ADD_COND_RUNNING"})
        t0, h = self.c.apply_bg(manifest(a, b, c))
        seen = {}

        def pred(wl):
            for n in ("ca", "cb", "cc"):
                st = wl.get(n, [""])[0]
                ok = st.startswith("Succeeded" if (succ and n == "ca")
                                   else "Running")
                if ok and n not in seen:
                    seen[n] = time.time()
            return "cc" in seen
        t, _ = self.c.wait_for(pred, 120)
        self.rec(test, "apply_to_C_running_s", rep, t - t0)
        for n in ("ca", "cb"):
            if n in seen:
                self.rec(test, f"apply_to_{n}_ok_s", rep, seen[n] - t0)

    def podman_floor(self, rep, n=10):
        """Raw `podman run -d IMAGE sleep 1000` time, n per rep (no
        orchestrator running): the physical floor for deploy latency."""
        podman_cleanup()
        for i in range(n):
            t = time.time()
            sh(["podman", "run", "-d", "--label", FLOOR_LABEL, self.a.image,
                "sleep", "1000"],
               check=True)
            self.rec("podman_floor", "podman_run_d_s", rep, time.time() - t)
        t = time.time()
        sh(["podman", "ps", "-a", "--format", "json"])
        self.rec("podman_floor", "podman_ps_json_s_10ctrs", rep,
                 time.time() - t)
        t = time.time()
        podman_cleanup()
        self.rec("podman_floor", "podman_rm_af_t0_10ctrs_s", rep,
                 time.time() - t)

    # ---------------------------------------------------------- driver
    def run(self):
        a = self.a
        tests = a.tests.split(",")
        for rep in range(1, a.reps + 1):
            log(f"=== rep {rep}/{a.reps}")
            for test in tests:
                try:
                    if test == "podman_floor":
                        self.podman_floor(rep)
                        continue
                    if test == "startup_seq":
                        # server first; time = agent launch -> listed
                        podman_cleanup()
                        ts = {}

                        def srv_up():
                            t = time.time()
                            while time.time() - t < 60:
                                if self.c.cli("get", "state")[0] == 0:
                                    ts["s"] = time.time() - t
                                    return
                                time.sleep(self.a.interval)
                        t0 = self.c.start(agent_after=srv_up)
                        self.rec(test, "server_launch_to_get_state_ok_s",
                                 rep, ts.get("s", float("nan")))
                        self.wait_ready(t0, None, rep)
                        self.rec(test, "agent_launch_to_agent_listed_s",
                                 rep, time.time() - t0)
                        continue
                    if test in ("startup", "idle0"):
                        if test == "idle0" and "startup" in tests:
                            continue  # done together with startup
                        podman_cleanup()
                        t0 = self.c.start()
                        self.wait_ready(t0, "startup", rep)
                        if "idle0" in tests:
                            time.sleep(a.settle)
                            self.measure_idle("idle0", rep, a.idle_secs)
                    else:
                        self.fresh()
                        if test == "deploy1":
                            self.deploy(test, rep, 1)
                        elif test == "deploy20":
                            self.deploy(test, rep, 20)
                            time.sleep(a.settle)
                            self.measure_idle("idle20", rep, a.idle_secs)
                        elif test == "update":
                            self.update(test, rep, trap=False)
                        elif test == "update_trap":
                            self.update(test, rep, trap=True)
                        elif test == "fail":
                            self.fail(test, rep)
                        elif test == "chain_run":
                            self.chain(test, rep, succ=False)
                        elif test == "chain_succ":
                            self.chain(test, rep, succ=True)
                        else:
                            raise ValueError(f"unknown test {test}")
                except Exception as e:  # keep going, report
                    log(f"ERROR test={test} rep={rep}: {e!r}")
                finally:
                    self.c.stop()
        self.summary()

    def summary(self):
        log("\n=== SUMMARY (median / min / max, n)")
        log(f"{'test':12s} {'metric':42s} {'median':>10s} {'min':>10s} "
            f"{'max':>10s}  n")
        for (test, metric), v in self.samples.items():
            log(f"{test:12s} {metric:42s} {statistics.median(v):10.3f} "
                f"{min(v):10.3f} {max(v):10.3f}  {len(v)}")
        if self.c.cli_times:
            ct = self.c.cli_times
            log(f"{'cli':12s} {'single_cli_call_s':42s} "
                f"{statistics.median(ct):10.3f} {min(ct):10.3f} "
                f"{max(ct):10.3f}  {len(ct)}")
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({f"{t}/{m}": v for (t, m), v in
                           self.samples.items()}, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    e = os.environ.get
    p.add_argument("--server", default=e("ANK_SERVER_BIN"))
    p.add_argument("--agent", default=e("ANK_AGENT_BIN"))
    p.add_argument("--cli", default=e("ANK_CLI_BIN"))
    p.add_argument("--reps", type=int, default=int(e("ANKBENCH_REPS", 5)))
    p.add_argument("--tests", default="podman_floor,startup,idle0,"
                   "startup_seq,deploy1,deploy20,"
                   "update,update_trap,fail,chain_run,chain_succ")
    p.add_argument("--port", type=int, default=25551)
    p.add_argument("--agent-name", default="ankbench",
                   help="the agent's name; only containers of this agent are"
                   " inspected and removed")
    p.add_argument("--image", default="localhost/busybox:latest")
    p.add_argument("--interval", type=float, default=0.05,
                   help="poll interval between CLI calls (s)")
    p.add_argument("--idle-secs", type=float, default=10.0)
    p.add_argument("--settle", type=float, default=2.0,
                   help="wait before idle measurement (s)")
    p.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ankbench", "run"))
    p.add_argument("--json", default=None)
    p.add_argument("--server-cmd",
                   default=e("ANKBENCH_SERVER_CMD",
                             "{server} --insecure --address {addr}"))
    p.add_argument("--agent-cmd",
                   default=e("ANKBENCH_AGENT_CMD",
                             "{agent} --insecure --name {name} "
                             "--server-url {url} --run-folder {run_folder}"))
    p.add_argument("--cli-cmd",
                   default=e("ANKBENCH_CLI_CMD",
                             "{cli} --insecure --server-url {url}"))
    a = p.parse_args()
    OWN["agent"] = a.agent_name
    for k in ("server", "agent", "cli"):
        if not getattr(a, k):
            p.error(f"--{k} (or ANK_{k.upper()}_BIN) is required")
        setattr(a, k, os.path.abspath(getattr(a, k)))
    os.makedirs(a.workdir, exist_ok=True)
    log(f"ankbench start {dt.datetime.now().isoformat()} host={os.uname()[1]}"
        f" cpus={os.cpu_count()}")
    for k in ("server", "agent", "cli"):
        log(f"  {k}: {getattr(a, k)}")
    log(f"  podman: {sh(['podman', '--version']).stdout.strip()}")
    log(f"  reps={a.reps} interval={a.interval} tests={a.tests}")
    b = Bench(a)
    try:
        b.run()
    except KeyboardInterrupt:
        b.c.stop()
        b.summary()


if __name__ == "__main__":
    main()
