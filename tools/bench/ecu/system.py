"""One implementation under test: its server, its agent and its CLI, started inside the
envelope (the CLI, the user's tool, outside it), and what the scenarios read from them:
reported states (`ank get state -o json workloadStates`), the agent's containers and
their processes, CPU and PSS of the daemons' process trees.
"""
import json
import os
import signal
import socket
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid, reaped=False):
    """utime + stime of `pid`; with `reaped`, also of the children it has waited for."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = int(fields[11]) + int(fields[12])
        return own + (int(fields[13]) + int(fields[14]) if reaped else 0)
    except (OSError, IndexError):
        return 0


def pss_kb(pid, field="Pss"):
    """A PSS field of `/proc/PID/smaps_rollup` in KiB: `Pss`, `Pss_Anon` (heap, stacks) or
    `Pss_File` (the mapped binary and libraries)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def tree(pid):
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def alive(pid, container_id):
    """The container's main process lives and is the container's (its cgroup names it)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return False  # killed, not yet reaped
        with open(f"/proc/{pid}/cgroup") as f:
            return container_id[:12] in f.read()
    except (OSError, IndexError):
        return False


class System:
    """`name` is `ref` or `ours`; `bins` holds ank-server, ank-agent, ank."""

    def __init__(self, name, bins, envelope, workdir, agent_name, runtime="podman",
                 state_file=False, containerd_namespace=None):
        self.name = name
        self.bins = bins
        self.env_ = envelope
        self.workdir = workdir
        self.agent_name = agent_name
        self.runtime = runtime
        self.state_file = os.path.join(workdir, "state.yaml") if state_file else None
        self.containerd_namespace = containerd_namespace
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = None
        self.agent = None
        self.run_folder = os.path.join(workdir, "run")
        os.makedirs(self.run_folder, exist_ok=True)
        self.log = open(os.path.join(workdir, f"{name}.log"), "ab")

    # ------------------------------------------------------------ daemons
    def _spawn(self, argv):
        self.log.write(f"\n== {time.strftime('%T')} {' '.join(argv)}\n".encode())
        self.log.flush()
        return subprocess.Popen(argv, stdout=self.log, stderr=self.log, env=self.env_.env(),
                                preexec_fn=self.env_.preexec(), start_new_session=True)

    def start_server(self, manifest=None):
        argv = [os.path.join(self.bins, "ank-server"), "--insecure",
                "--address", f"127.0.0.1:{self.port}"]
        if manifest:
            argv += ["--startup-manifest", manifest]
        if self.state_file:
            argv += ["--state-file", self.state_file]
        self.server = self._spawn(argv)

    def start_agent(self):
        argv = [os.path.join(self.bins, "ank-agent"), "--insecure", "--name", self.agent_name,
                "--server-url", self.url, "--run-folder", self.run_folder]
        if self.containerd_namespace:
            argv += ["--containerd-namespace", self.containerd_namespace]
        argv += getattr(self, "agent_args", [])
        self.agent = self._spawn(argv)

    def stop(self, sig=signal.SIGTERM):
        for p in (self.agent, self.server):
            if p and p.poll() is None:
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
        for p in (self.agent, self.server):
            if p:
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.agent = self.server = None

    def reap(self):
        """After a power cut: collect the killed daemons."""
        for p in (self.agent, self.server):
            if p:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.agent = self.server = None

    def cpu_ticks_of(self, proc):
        """CPU ticks of a daemon's process tree: itself, the children it keeps and those
        it has ended and waited for (a `podman` call per poll, say)."""
        if not proc:
            return 0
        return cpu_ticks(proc.pid, reaped=True) + sum(cpu_ticks(q, reaped=True)
                                                      for q in tree(proc.pid)[1:])

    def daemon_pids(self):
        return [p.pid for p in (self.server, self.agent) if p and p.poll() is None]

    # ------------------------------------------------------------ CLI
    def cli(self, *args, timeout=60):
        argv = [os.path.join(self.bins, "ank"), "--insecure", "--server-url", self.url, *args]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def apply(self, manifest, delete=False, timeout=600):
        args = ["--no-wait", "apply"]
        if delete:
            args.append("-d")
        return self.cli(*args, manifest, timeout=timeout)

    def states(self):
        """{workload: [(id, state, substate)]} of this agent, or None when the server does
        not answer."""
        try:
            r = self.cli("get", "state", "-o", "json", "workloadStates", timeout=20)
        except subprocess.TimeoutExpired:
            return None
        if r.returncode != 0:
            return None
        try:
            doc = json.loads(r.stdout)
        except ValueError:
            return None
        out = {}
        agents = (doc.get("workloadStates") or {})
        for wl, ids in (agents.get(self.agent_name) or {}).items():
            for wid, st in ids.items():
                st = st or {}
                state, sub = _state_of(st)
                out.setdefault(wl, []).append((wid, state, sub))
        return out

    def desired_names(self):
        r = self.cli("get", "state", "-o", "json", "desiredState.workloads", timeout=20)
        if r.returncode != 0:
            return None
        doc = json.loads(r.stdout)
        wls = ((doc.get("desiredState") or {}).get("workloads") or {})
        return {n for n, w in wls.items() if (w or {}).get("agent") == self.agent_name}

    # ------------------------------------------------------------ containers
    def containers(self):
        """[(id, name, running, pid)] of this agent's podman containers."""
        if self.runtime == "containerd":
            return self._tasks()
        r = subprocess.run(["podman", "ps", "-a", "--no-trunc", "--filter",
                            f"name=\\.{self.agent_name}$", "--format", "{{.ID}} {{.Names}}"],
                           capture_output=True, text=True, env=self.env_.env(), timeout=120)
        ids = [line.split() for line in r.stdout.splitlines() if line.strip()]
        if not ids:
            return []
        r = subprocess.run(["podman", "inspect", "--format",
                            "{{.ID}} {{.Name}} {{.State.Running}} {{.State.Pid}}"]
                           + [i[0] for i in ids], capture_output=True, text=True,
                           env=self.env_.env(), timeout=120)
        out = []
        for line in r.stdout.splitlines():
            f = line.split()
            if len(f) == 4:
                out.append((f[0], f[1], f[2] == "true", int(f[3])))
        return out

    def _tasks(self):
        ns = self.containerd_namespace
        r = subprocess.run(["ctr", "-n", ns, "tasks", "ls"], capture_output=True, text=True)
        tasks = {}
        for line in r.stdout.splitlines()[1:]:
            f = line.split()
            if len(f) >= 3:
                tasks[f[0]] = (int(f[1]), f[2] == "RUNNING")
        r = subprocess.run(["ctr", "-n", ns, "containers", "ls", "-q"], capture_output=True,
                           text=True)
        out = []
        for cid in r.stdout.split():
            pid, running = tasks.get(cid, (0, False))
            out.append((cid, cid, running, pid))
        return out

    def remove_containers(self):
        if self.runtime == "containerd":
            ns = self.containerd_namespace
            for cid, _n, _r, _p in self._tasks():
                subprocess.run(["ctr", "-n", ns, "tasks", "kill", "-s", "SIGKILL", cid],
                               capture_output=True)
                subprocess.run(["ctr", "-n", ns, "tasks", "rm", "-f", cid], capture_output=True)
                subprocess.run(["ctr", "-n", ns, "containers", "rm", cid], capture_output=True)
            return
        # A container whose processes died with their conmon (a power cut) still counts
        # as running for podman: the first `rm -f` only finds out, the second removes it.
        for _ in range(3):
            try:
                ids = [c[0] for c in self.containers()]
                if not ids:
                    return
                subprocess.run(["podman", "rm", "-f", "-t", "0"] + ids, capture_output=True,
                               env=self.env_.env(), timeout=180)
            except subprocess.TimeoutExpired:
                # A run that stalled at the memory limit leaves podman calls in the envelope
                # that hold the containers' locks and crawl: the daemons are stopped, so
                # everything still in the envelope is this run's and goes.
                print(f"  {self.name}: podman hangs; killing what is left in the envelope "
                      "and renumbering its locks", flush=True)
                if self.env_.enabled:
                    self.env_.power_cut()
                subprocess.run(["podman", "system", "renumber"], capture_output=True,
                               env=self.env_.env(), timeout=120)
        raise RuntimeError(f"{self.name}: could not remove the containers of the run")

    # ------------------------------------------------------------ resources
    def cpu_ticks(self, with_tree=True):
        pids = [q for p in self.daemon_pids() for q in (tree(p) if with_tree else [p])]
        return sum(cpu_ticks(p) for p in pids)

    def pss_kb(self):
        """PSS of the daemons and of their process trees (children they keep)."""
        daemons = sum(pss_kb(p) for p in self.daemon_pids())
        trees = sum(pss_kb(q) for p in self.daemon_pids() for q in tree(p))
        return daemons, trees

    def pss_anon_kb(self):
        """The anonymous part of the daemons' PSS (heap and stacks; the rest is their
        code and libraries)."""
        return sum(pss_kb(p, "Pss_Anon") for p in self.daemon_pids())


def _state_of(st):
    """(`Running`, `Ok`) from Ankaios' JSON shape of an execution state."""
    return st.get("state", "Unknown"), st.get("subState", "")
