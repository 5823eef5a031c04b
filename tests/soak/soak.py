#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""soak.py — `make soak`: the fault-injection soak of a fiberd fleet (not part of make check).

Two fiberd hosts in fleet mode share one redis-server (appendonly, an fsync at every
write, its directory on a small tmpfs when run as root) in a temporary directory. For
SOAK_MINUTES (default 3) clients of several users (root, soak1, soak2: created with
useradd when run as root; one user otherwise, said so) pipeline jobs of every bundled
plugin (echo, sha256, skynet, sleep, spin) to either host, while a driver, at random
every 2 to 6 s, does one of:
  kill9-host     kill -9 one host (restarted at once under the same node name)
  kill9-redis    kill -9 redis-server and start it again on its data
  hang-redis     SIGSTOP redis-server for 3 s, then SIGCONT
  fill-disk      fill redis-server's tmpfs for 3 s, then free it (root only)
  crash-plugin   submit a job of the test plugin crash_run: it kills the host running it
                 (restarted; after two crashes its plugin is quarantined there)
  reload         SIGHUP to one host (reloads its config)
Then it stops the faults and the clients, lets the fleet settle and counts:
  - every job a client was told was accepted has a record in a final state, exactly one
    (the record's state; jobs whose runs ended twice, from the hosts' logs, are counted
    apart: a job running when its host was killed runs again, as documented);
  - no id was answered twice;
  - no record of the store is queued or running once the fleet settled, and nothing is
    left pending in the consumer group, but for jobs of a plugin no host loads
    (crash_run once both hosts quarantined it: such a job waits in the stream for a host
    that loads it, by design), counted apart; a failing count logs each record left and
    each pending entry with its consumer;
  - each host's RSS and open fds, after the load, against its baseline under load.
It prints a Markdown table (docs/testing.md keeps one) and exits 1 when a count fails.

Needs: the built tree (make all; FIBERD, PLUGIN_DIR and TEST_PLUGIN_DIR from the Makefile),
redis-server, Debian's python3-msgpack (the client is client/python). Environment:
SOAK_MINUTES, SOAK_SEED, SOAK_KEEP=1 keeps the temporary directory.
"""
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
from fiberd import Client, FiberdError  # noqa: E402

FIBERD = os.environ.get("FIBERD", os.path.join(ROOT, "build", "fiberd"))
PLUGIN_DIR = os.environ.get("PLUGIN_DIR", os.path.join(ROOT, "build", "plugins"))
TEST_PLUGIN_DIR = os.environ.get("TEST_PLUGIN_DIR", os.path.join(ROOT, "build", "tests", "plugins"))
MINUTES = float(os.environ.get("SOAK_MINUTES", "3"))
SEED = int(os.environ.get("SOAK_SEED", str(int(time.time()))))
FINAL = {"done", "failed", "cancelled", "dead"}
PLUGINS = ["echo", "sha256", "skynet", "sleep", "spin"]
USERS = ["soak1", "soak2"]
# the client's own errors (client/python): not answers from fiberd
TRANSPORT = ("cannot connect to", "the connection to", "no answer from fiberd",
             "fiberd closed the connection")


def log(msg):
    print(f"soak: {msg}", flush=True)


# ---------------------------------------------------------------- redis (RESP) -----

class Redis:
    """A tiny RESP client on a Unix socket: enough for the counts."""

    def __init__(self, path):
        self.path = path
        self.sock = None

    def _connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)
        self.buf, self.pos = b"", 0

    def _more(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("redis closed")
        self.buf = self.buf[self.pos:] + chunk  # consumed bytes dropped once per read
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line, self.pos = self.buf[self.pos:end], end + 2
                return line
            self._more()

    def _read(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b"-"):
            return rest.decode()
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._more()
            data = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return data.decode(errors="replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ValueError(f"bad reply {line!r}")

    def pipeline(self, cmds):
        if self.sock is None:
            self._connect()
        out = []
        for cmd in cmds:
            out.append(b"*%d\r\n" % len(cmd))
            for a in cmd:
                a = str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return [self._read() for _ in cmds]

    def call(self, *cmd):
        return self.pipeline([cmd])[0]


# ---------------------------------------------------------------- the fleet --------

class Fleet:
    def __init__(self, base):
        self.base = base
        self.redis_dir = os.path.join(base, "redis")
        self.redis_sock = os.path.join(self.redis_dir, "redis.sock")
        self.redis_proc = None
        self.tmpfs = False
        self.hosts = {}
        self.restarts = {"a": 0, "b": 0, "redis": 0}

    # redis-server, its data on a tmpfs when we may mount one
    def redis_start(self):
        if self.redis_proc is None and not os.path.isdir(self.redis_dir):
            os.makedirs(self.redis_dir)
            if os.geteuid() == 0:
                # room for the whole run's records (every job is kept, for the counts:
                # about 1 KiB each in the AOF) and the AOF's rewrites, so that only
                # fill-disk fills it
                size = max(256, 160 * MINUTES)
                self.tmpfs = subprocess.run(
                    ["mount", "-t", "tmpfs", "-o", f"size={size:.0f}m", "tmpfs",
                     self.redis_dir], capture_output=True).returncode == 0
            if not self.tmpfs:
                log("fill-disk skipped: cannot mount a tmpfs here (not root?)")
        try:
            os.unlink(self.redis_sock)
        except FileNotFoundError:
            pass
        self.redis_proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.redis_sock,
             "--unixsocketperm", "700", "--save", "", "--appendonly", "yes",
             "--appendfsync", "always", "--dir", self.redis_dir,
             "--logfile", os.path.join(self.base, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120  # it answers LOADING until its AOF is read
        while time.time() < deadline:
            try:
                if Redis(self.redis_sock).call("PING") == "PONG":
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def redis_kill(self):
        self.redis_proc.send_signal(signal.SIGCONT)
        self.redis_proc.kill()
        self.redis_proc.wait()
        self.redis_proc = None

    def host_dir(self, node):
        return os.path.join(self.base, "host-" + node)

    def host_sock(self, node):
        return os.path.join(self.host_dir(node), "fiberd.sock")

    def host_start(self, node, attempt=0):
        d = self.host_dir(node)
        plugins = os.path.join(d, "plugins")
        if not os.path.isdir(d):
            os.makedirs(plugins)
            os.chmod(d, 0o755)
            for p in PLUGINS:
                subprocess.run(["cp", os.path.join(PLUGIN_DIR, p + ".so"), plugins], check=True)
            subprocess.run(["cp", os.path.join(TEST_PLUGIN_DIR, "crash_run.so"), plugins],
                           check=True)
            # every record kept for the counts: retention_max at its largest (a 30-minute
            # run accepts more than a million jobs, and retention would drop the oldest)
            with open(os.path.join(d, "fiberd.conf"), "w") as f:
                f.write("[jobs]\nmax_running = 16\nretention_max = 10000000\n"
                        "retention_s = 86400\nmax_queued_per_user = 100000\n"
                        f"[store]\nbackend = redis\nredis = unix:{self.redis_sock}\n"
                        f"node = {node}\nclaim_idle_ms = 2000\n")
        env = dict(os.environ, FIBERD_SOCKET=self.host_sock(node), STATE_DIRECTORY=d)
        logf = open(os.path.join(d, "fiberd.log"), "a")
        proc = subprocess.Popen([FIBERD, "--plugin-dir", plugins, "--config",
                                 os.path.join(d, "fiberd.conf"), "--log-level", "info",
                                 "--workers", "2"],
                                env=env, stdout=logf, stderr=logf)
        logf.close()
        self.hosts[node] = proc
        deadline = time.time() + 120  # a start waits for Redis, then reads its jobs
        while time.time() < deadline:
            # a host waits for redis-server at start: keep it up meanwhile (it exits when
            # its AOF cannot be written)
            self.redis_keep_up()
            if proc.poll() is not None:
                # as Restart=on-failure would: a host whose Redis went away in the middle
                # of its start exits 75 (EX_TEMPFAIL); try again, a few times, and say why
                with open(os.path.join(d, "fiberd.log")) as f:
                    why = f.read().splitlines()[-3:]
                self.restarts["start-failures"] = self.restarts.get("start-failures", 0) + 1
                print(f"soak: host {node} exited with {proc.returncode} at start: "
                      + " | ".join(why), file=sys.stderr)
                if attempt >= 5:
                    raise RuntimeError(f"host {node} exited with {proc.returncode} at start "
                                       f"{attempt + 1} times")
                time.sleep(1)
                return self.host_start(node, attempt + 1)
            try:
                with Client(self.host_sock(node), timeout=1) as c:
                    c.ping()
                    return
            except (OSError, FiberdError):
                time.sleep(0.05)
        raise RuntimeError(f"host {node} did not start")

    def host_alive(self, node):
        return self.hosts[node].poll() is None

    def redis_keep_up(self):
        """Starts redis-server again when it died (as Restart= would)."""
        if self.redis_proc is None or self.redis_proc.poll() is not None:
            if self.redis_proc is not None:
                self.restarts["redis"] += 1
            self.redis_proc = None
            self.redis_start()

    def host_keep_up(self):
        """Restarts what died: redis-server (it exits when it cannot write its AOF with
        appendfsync always, as after fill-disk), a host (kill -9, a crashed plugin)."""
        self.redis_keep_up()
        for node in self.hosts:
            if not self.host_alive(node):
                self.hosts[node].wait()
                self.restarts[node] += 1
                self.host_start(node)

    def host_usage(self, node):
        pid = self.hosts[node].pid
        rss = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return rss, len(os.listdir(f"/proc/{pid}/fd"))

    def stop(self):
        for node, proc in self.hosts.items():
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        if self.redis_proc:
            self.redis_kill()
        if self.tmpfs:
            subprocess.run(["umount", self.redis_dir])


# ---------------------------------------------------------------- clients ----------

def job_args(rng):
    p = rng.choice(PLUGINS)
    if p == "echo":
        return p, {"msg": "soak"}
    if p == "sha256":
        return p, {"path": "/etc/os-release"}
    if p == "skynet":
        return p, {"size": 1000, "div": 10}
    if p == "sleep":
        return p, {"ms": rng.randint(1, 50)}
    return p, {"ms": rng.randint(1, 5)}


def client_main(idx, user, socks, stop_at, out_path):
    """One client: pipelines 8 submissions at a time to a random host until stop_at;
    writes the ids it was told were accepted and its other answers' codes to out_path."""
    if user and os.geteuid() == 0:
        import pwd
        pw = pwd.getpwnam(user)
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    rng = random.Random(SEED * 100 + idx)
    accepted, codes, lost, samples = [], {}, 0, {}
    c = None
    while time.time() < stop_at:
        try:
            if c is None:
                c = Client(rng.choice(socks), timeout=30)
            ids = []
            for _ in range(8):
                plugin, args = job_args(rng)
                ids.append(c.send("job.submit", plugin, args, {}))
            c.flush(timeout=30)
            for k, msgid in enumerate(ids):
                try:
                    answer = c.wait_reply(msgid, timeout=60)
                    accepted.append(answer["id"] if isinstance(answer, dict) else answer)
                except FiberdError as e:
                    if e.message.startswith(TRANSPORT):
                        lost += len(ids) - k  # no answer: the host went away
                        raise
                    codes[e.code] = codes.get(e.code, 0) + 1
                    if e.code not in ("UNAVAILABLE", "OVERLOADED"):
                        samples[e.code] = e.message
            if codes.get("UNAVAILABLE") and rng.random() < 0.5:
                time.sleep(0.05)  # told to retry later
            if rng.random() < 0.05:  # another host now and then
                c.close()
                c = None
        except (OSError, FiberdError):
            if c:
                try:
                    c.close()
                except OSError:
                    pass
            c = None
            time.sleep(0.1)
        time.sleep(0.01)
    with open(out_path, "w") as f:  # created by the driver
        f.write(f"{lost}\n")
        f.write(" ".join(f"{k}={v}" for k, v in codes.items()) + "\n")
        f.write(" ".join(str(i) for i in accepted) + "\n")
        for code, msg in samples.items():
            f.write(f"{code}: {msg}\n")


# ---------------------------------------------------------------- faults -----------

def fault(fleet, rng, counts):
    kinds = ["kill9-host", "kill9-redis", "hang-redis", "crash-plugin", "reload"]
    if fleet.tmpfs:
        kinds.append("fill-disk")
    kind = rng.choice(kinds)
    counts[kind] = counts.get(kind, 0) + 1
    node = rng.choice(["a", "b"])
    if kind == "kill9-host":
        fleet.hosts[node].kill()
        fleet.hosts[node].wait()
        time.sleep(0.3)
    elif kind == "kill9-redis":
        fleet.redis_kill()
        time.sleep(rng.uniform(0.5, 3))
        fleet.redis_start()
    elif kind == "hang-redis":
        fleet.redis_proc.send_signal(signal.SIGSTOP)
        time.sleep(3)
        fleet.redis_proc.send_signal(signal.SIGCONT)
    elif kind == "fill-disk":
        fill = os.path.join(fleet.redis_dir, "fill")
        subprocess.run(["dd", "if=/dev/zero", f"of={fill}", "bs=1M"],  # until it is full
                       capture_output=True)
        time.sleep(3)
        os.unlink(fill)
    elif kind == "crash-plugin":
        try:
            with Client(fleet.host_sock(node), timeout=5) as c:
                c.submit("crash_run", {"ms": 100})
        except (OSError, FiberdError, TimeoutError):
            pass
    elif kind == "reload" and fleet.host_alive(node):
        fleet.hosts[node].send_signal(signal.SIGHUP)
    fleet.host_keep_up()


# ---------------------------------------------------------------- the counts -------

def settle(fleet, seconds):
    """Waits until nothing is pending and no record is unfinished; the unfinished left."""
    deadline = time.time() + seconds
    r = Redis(fleet.redis_sock)
    while True:
        fleet.host_keep_up()
        try:
            pending = r.call("XPENDING", "fiberd:jobs", "fiberd")[0]
        except OSError:
            r = Redis(fleet.redis_sock)
            time.sleep(1)
            continue
        if pending and time.time() < deadline:
            time.sleep(1)
            continue
        ids = r.call("ZRANGE", "fiberd:index", 0, -1)
        states = r.pipeline([("HGET", f"fiberd:job:{i}", "state") for i in ids]) if ids else []
        unfinished = {i: s for i, s in zip(ids, states) if s is not None and s not in FINAL}
        orphans = no_host_loads(fleet, r, unfinished)
        pending = r.call("XPENDING", "fiberd:jobs", "fiberd")[0]
        if (len(unfinished) == len(orphans) and pending == len(orphans)) or \
                time.time() > deadline:
            return r, ids, states, unfinished, orphans, pending
        time.sleep(1)


def no_host_loads(fleet, r, unfinished):
    """The unfinished jobs that wait for a plugin no host loads now (crash_run once both
    hosts quarantined it): a fleet job waits in the stream for a host that loads its
    plugin, as documented; queued, or running when its host was killed (a host that
    loads the plugin decides whether it runs again). None while a host does not answer."""
    queued = [i for i, s in unfinished.items() if s in ("queued", "running")]
    if not queued:
        return set()
    loaded = set()
    for node in ("a", "b"):
        try:
            with Client(fleet.host_sock(node), timeout=5) as c:
                loaded |= {p["name"] for p in c.plugins()["plugins"]}
        except (OSError, FiberdError, TimeoutError):
            return set()
    plugins = r.pipeline([("HGET", f"fiberd:job:{i}", "plugin") for i in queued])
    return {i for i, p in zip(queued, plugins) if p not in loaded}


def stuck(r, unfinished):
    """Logs what a failed settle left: each unfinished record and the group's pending
    entries with their consumers, so that a failing seed names the job and the host."""
    for i in list(unfinished)[:10]:
        rec = r.call("HGETALL", f"fiberd:job:{i}")
        log(f"unfinished {i}: " + " ".join(f"{k}={v}" for k, v in zip(rec[::2], rec[1::2])
                                           if k not in ("args", "result")))
    for e in r.call("XPENDING", "fiberd:jobs", "fiberd", "-", "+", 10) or []:
        log(f"pending entry {e[0]}: consumer {e[1]}, idle {e[2]} ms, delivered {e[3]}")
        for entry in r.call("XRANGE", "fiberd:jobs", e[0], e[0]) or []:
            log(f"  fields: {entry[1]}")


def finished_twice(fleet):
    """Job ids whose runs ended on a host twice or more (the hosts' `finished` lines)."""
    seen = {}
    for node in ("a", "b"):
        with open(os.path.join(fleet.host_dir(node), "fiberd.log"), errors="replace") as f:
            for line in f:
                if ": finished " in line and line.startswith("<6>job "):
                    jid = line.split()[1]
                    seen[jid] = seen.get(jid, 0) + 1
    return sum(1 for n in seen.values() if n > 1)


def main():
    base = tempfile.mkdtemp(prefix="fiberd-soak-")
    os.chmod(base, 0o755)
    rng = random.Random(SEED)
    users = [None]
    if os.geteuid() == 0:
        for u in USERS:
            if subprocess.run(["id", u], capture_output=True).returncode != 0:
                subprocess.run(["useradd", "--system", "--no-create-home", u],
                               capture_output=True)
            if subprocess.run(["id", u], capture_output=True).returncode == 0:
                users.append(u)
    if len(users) == 1:
        log("one user only (not root, or useradd failed): the per-user part is skipped")
    log(f"{MINUTES} min, seed {SEED}, users {['root' if u is None else u for u in users]}, "
        f"in {base}")
    fleet = Fleet(base)
    failures = []
    procs = []
    try:
        fleet.redis_start()
        fleet.host_start("a")
        fleet.host_start("b")
        socks = [fleet.host_sock("a"), fleet.host_sock("b")]
        stop_at = time.time() + MINUTES * 60
        outs = []
        for i in range(6):
            out = os.path.join(base, f"client-{i}.out")
            outs.append(out)
            with open(out, "w"):
                pass
            os.chmod(out, 0o666)  # written by the client as its user
            user = users[i % len(users)]
            p = mp.Process(target=client_main, args=(i, user, socks, stop_at, out))
            p.start()
            procs.append(p)
            if user:
                os.chmod(base, 0o755)
        time.sleep(5)  # the baseline: under load, before any fault
        base_usage = {n: fleet.host_usage(n) for n in ("a", "b")}
        counts = {}
        while time.time() < stop_at - 3:
            time.sleep(rng.uniform(2, 6))
            if time.time() >= stop_at - 3:
                break
            fault(fleet, rng, counts)
        for p in procs:
            p.join(timeout=180)
        fleet.host_keep_up()
        r, ids, states, unfinished, orphans, pending = settle(fleet, 180)
        time.sleep(2)
        end_usage = {n: fleet.host_usage(n) for n in ("a", "b")}

        accepted, codes, lost = [], {}, 0
        for out in outs:
            with open(out) as f:
                lines = f.read().split("\n")
            lost += int(lines[0])
            for kv in lines[1].split():
                k, v = kv.split("=")
                codes[k] = codes.get(k, 0) + int(v)
            accepted += [int(x) for x in lines[2].split()]
            for line in lines[3:]:
                if line:
                    log("an answer: " + line)
        repeats = len(accepted) - len(set(accepted))
        state_of = dict(zip(ids, states))
        missing = [i for i in accepted if state_of.get(str(i)) is None]
        not_final = [i for i in accepted if state_of.get(str(i)) not in FINAL]
        by_state = {}
        for i in accepted:
            s = state_of.get(str(i), "missing")
            by_state[s] = by_state.get(s, 0) + 1
        failed = [i for i in accepted if state_of.get(str(i)) == "failed"]
        why = r.pipeline([("HGET", f"fiberd:job:{i}", "error_code") for i in failed]) if failed else []
        failed_by = {}
        for code in why:
            failed_by[code] = failed_by.get(code, 0) + 1
        twice = finished_twice(fleet)
        rows = [
            ("duration", f"{MINUTES:g} min, seed {SEED}, {len(users)} users, 2 hosts, 6 clients"),
            ("faults", ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))),
            ("restarts after a death", f"host a {fleet.restarts['a']}, host b "
             f"{fleet.restarts['b']}, redis-server {fleet.restarts['redis']} (its AOF "
             "could not be written: fill-disk); hosts that exited at start and were "
             f"started again: {fleet.restarts.get('start-failures', 0)}"),
            ("submissions accepted", str(len(accepted))),
            ("refused", ", ".join(f"{k} {v}" for k, v in sorted(codes.items())) or "none"),
            ("unanswered (host killed under the batch)", str(lost)),
            ("accepted jobs by final state", ", ".join(f"{k} {v}" for k, v in sorted(by_state.items()))),
            ("failed, by error", ", ".join(f"{k} {v}" for k, v in sorted(failed_by.items()))
             or "none"),
            ("accepted jobs not final / missing", f"{len(not_final)} / {len(missing)}"),
            ("ids answered twice", str(repeats)),
            ("records queued or running after settling (besides the next row's)",
             str(len(unfinished) - len(orphans))),
            ("records queued or running for a plugin no host loads (crash_run, quarantined "
             "on both hosts: they wait in the stream for a host that loads it)",
             str(len(orphans))),
            ("entries pending in the group", str(pending)),
            ("jobs whose runs ended twice (logs: the host, or redis-server, died before "
             "its final write was kept, so the job ran again)", str(twice)),
        ]
        for n in ("a", "b"):
            (br, bf), (er, ef) = base_usage[n], end_usage[n]
            rows.append((f"host {n} RSS / fds: baseline -> end",
                         f"{br // 1024} MiB / {bf} -> {er // 1024} MiB / {ef}"))
            if ef > bf + 2 or er > br * 1.5 + 32 * 1024:
                failures.append(f"host {n} did not come back to its baseline")
        if codes.get("INTERNAL"):
            failures.append(f"{codes['INTERNAL']} submissions answered INTERNAL")
        if not_final or missing:
            failures.append(f"{len(not_final)} accepted jobs not final ({len(missing)} missing)")
        if repeats:
            failures.append(f"{repeats} ids answered twice")
        if len(unfinished) > len(orphans) or pending != len(orphans):
            failures.append(f"{len(unfinished) - len(orphans)} records unfinished, "
                            f"{pending} pending ({len(orphans)} of a plugin no host loads)")
            stuck(r, unfinished)
        print("\n| soak | |\n|---|---|")
        for k, v in rows:
            print(f"| {k} | {v} |")
        print()
    except Exception:
        failures.append("the run stopped: " + traceback.format_exc().strip().splitlines()[-1])
        # what the logs said last, before the directory goes
        for name in ("redis.log", "host-a/fiberd.log", "host-b/fiberd.log"):
            try:
                with open(os.path.join(base, name), errors="replace") as f:
                    tail = f.read().splitlines()[-8:]
                log(f"last lines of {name}:\n    " + "\n    ".join(tail))
            except OSError:
                pass
        for p in procs:  # the clients would go on until the run's end
            p.terminate()
        raise
    finally:
        fleet.stop()
        if not os.environ.get("SOAK_KEEP"):
            subprocess.run(["rm", "-rf", base])
        else:
            log(f"kept {base}")
    for f in failures:
        log("FAIL: " + f)
    log("ok" if not failures else "failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
