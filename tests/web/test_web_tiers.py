#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`make check-web`, second part: the dashboard keeps to fiberd's access tiers.

fiberd runs as root with the built plugins; two unprivileged users (fiberd-web-a and
fiberd-web-b, created with useradd when missing) each submit sleep jobs with fiberctl,
and `fiberctl web` runs AS user A, so its socket connection carries A's credentials.
Then, through the dashboard's HTTP API only (urllib with the token header, no browser):
/api/ping says A's uid; /api/jobs lists A's jobs and none of B's; /api/job of B's job,
/api/cancel of B's running job and /api/retry of B's cancelled job answer 404
NOT_FOUND, and fiberctl as root then finds B's jobs as they were (running, cancelled);
/api/cancel of A's own running job cancels it. Run as root (fiberd must be, and the
test changes uids with setpriv). Every wait is on a condition with a deadline.

Usage: test_web_tiers.py FIBERCTL FIBERD PLUGIN_DIR"""
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FIBERCTL, FIBERD, PLUGINS = sys.argv[1:4]
USERS = ("fiberd-web-a", "fiberd-web-b")
DEADLINE_S = 20


def wait_for(what, fn, timeout=DEADLINE_S):
    """fn() until it returns something true, or fail naming @what."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def user(name):
    """(uid, gid) of @name, created as a system user without a home when missing."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", name], check=True)
        pw = pwd.getpwnam(name)
    return pw.pw_uid, pw.pw_gid


def as_user(ids, argv):
    """@argv run as @ids (uid, gid), with no supplementary groups and a bare environment."""
    return ["setpriv", "--reuid=%d" % ids[0], "--regid=%d" % ids[1], "--clear-groups",
            "env", "-i", "PATH=/usr/bin:/bin", "HOME=/", *argv]


def ctl(sock, *args, ids=None):
    argv = [FIBERCTL, "-s", sock, *args]
    return subprocess.run(as_user(ids, argv) if ids else argv, capture_output=True, text=True,
                          timeout=30)


def state(sock, job):
    """The job's state, asked by root (an admin sees every user's jobs)."""
    r = ctl(sock, "--json", "status", str(job))
    assert r.returncode == 0, "fiberctl status %s: %s" % (job, r.stderr)
    return json.loads(r.stdout)["state"]


def submit_sleep(sock, ids):
    r = ctl(sock, "submit", "sleep", "ms=600000", ids=ids)
    assert r.returncode == 0 and r.stdout.strip().isdigit(), r
    return int(r.stdout.strip())


def api(base, token, path, method="GET"):
    """(status, decoded JSON) of one dashboard API request with the token header."""
    req = urllib.request.Request(base + "/api/" + path, method=method,
                                 headers={"X-Fiberd-Token": token})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())


def main():
    assert os.geteuid() == 0, "test_web_tiers.py needs root: fiberd runs as root, users change"
    a, b = user(USERS[0]), user(USERS[1])
    tmp = tempfile.mkdtemp(prefix="fiberd-web-tiers-")
    os.chmod(tmp, 0o755)  # the users reach the socket (fiberd makes it 0666) through it
    sock = os.path.join(tmp, "fiberd.sock")
    procs = []
    try:
        fiberd = subprocess.Popen([FIBERD, "--config", "/dev/null", "--socket", sock,
                                   "--plugin-dir", PLUGINS, "--workers", "2",
                                   "--log-level", "warning"],
                                  stderr=open(os.path.join(tmp, "fiberd.log"), "w"),
                                  env=dict(os.environ, STATE_DIRECTORY=tmp))
        procs.append(fiberd)
        wait_for("fiberd to answer", lambda: fiberd.poll() is None and
                 ctl(sock, "ping").returncode == 0)

        a_jobs = [submit_sleep(sock, a) for _ in range(2)]
        b_run, b_cancelled = submit_sleep(sock, b), submit_sleep(sock, b)
        assert ctl(sock, "cancel", str(b_cancelled), ids=b).returncode == 0
        for j in a_jobs + [b_run]:
            wait_for("job %d to run" % j, lambda j=j: state(sock, j) == "running")
        wait_for("job %d to end cancelled" % b_cancelled,
                 lambda: state(sock, b_cancelled) == "cancelled")

        web = subprocess.Popen(as_user(a, [FIBERCTL, "-s", sock, "--json", "web"]),
                               stdout=subprocess.PIPE, text=True)
        procs.append(web)
        info = json.loads(web.stdout.readline())
        base, token = "http://127.0.0.1:%d" % info["port"], info["token"]

        status, pong = api(base, token, "ping")
        assert status == 200 and pong["uid"] == a[0], "the dashboard is not uid %d: %s" % (
            a[0], pong)

        status, page = api(base, token, "jobs")
        assert status == 200, page
        listed = {j["id"]: j["owner"] for j in page["jobs"]}
        assert set(listed) == set(a_jobs), "A's dashboard lists %s; A's jobs are %s" % (
            listed, a_jobs)
        assert set(listed.values()) == {a[0]}, listed
        print("check-web tiers: uid %d's dashboard lists its jobs %s and none of uid %d's" %
              (a[0], a_jobs, b[0]))

        for what, path, method in (("see", "job?id=%d" % b_run, "GET"),
                                   ("cancel", "cancel?id=%d" % b_run, "POST"),
                                   ("retry", "retry?id=%d" % b_cancelled, "POST")):
            status, err = api(base, token, path, method)
            assert status == 404 and err.get("error", {}).get("code") == "NOT_FOUND", \
                "A's dashboard could %s B's job: HTTP %d %s" % (what, status, err)
        assert state(sock, b_run) == "running", "B's job %d: %s" % (b_run, state(sock, b_run))
        assert state(sock, b_cancelled) == "cancelled", "B's job %d was retried" % b_cancelled
        print("check-web tiers: B's job %d still runs and %d stays cancelled after A's "
              "dashboard asked to see, cancel and retry them (404 each)" % (b_run, b_cancelled))

        status, rec = api(base, token, "cancel?id=%d" % a_jobs[0], "POST")
        assert status == 200 and rec.get("id") == a_jobs[0], (status, rec)
        wait_for("A's job %d to end cancelled" % a_jobs[0],
                 lambda: state(sock, a_jobs[0]) == "cancelled")
        assert state(sock, a_jobs[1]) == "running"
        print("check-web tiers: A cancelled its own job %d from the dashboard" % a_jobs[0])
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    assert web.returncode == 0, "fiberctl web exited %d" % web.returncode
    print("check-web tiers: ok")


if __name__ == "__main__":
    main()
