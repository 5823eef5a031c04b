#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`make check-web`: `fiberctl web` in a real headless Chromium (Debian's chromium,
chromium-driver and python3-selenium).

A private fiberd on a temp socket with the built plugins, `fiberctl web` on it; then:
requests without the token (or with a wrong one, a foreign Host, a cross-origin POST)
answer 403; the page loads with its counts; jobs submitted with fiberctl show up live
in the counts and the throughput graph; the cancel button of a running 60 s sleep job
cancels it (fiberctl then says `cancelled`); the job's detail shows its args. Every wait
is on a condition with a deadline. A screenshot goes to $WEB_SCREENSHOT
(build/web-dashboard.png).

Usage: test_web.py FIBERCTL FIBERD PLUGIN_DIR SCREENSHOT"""
import json
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# selenium reaches chromedriver at "localhost"; a minimal root (debootstrap minbase, some
# containers) has no /etc/hosts, and then that name does not resolve: it means loopback.
_getaddrinfo = socket.getaddrinfo


def _loopback_getaddrinfo(host, *args, **kwargs):
    return _getaddrinfo("127.0.0.1" if host == "localhost" else host, *args, **kwargs)


socket.getaddrinfo = _loopback_getaddrinfo

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FIBERCTL, FIBERD, PLUGINS, SHOT = sys.argv[1:5]
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


def ctl(sock, *args):
    return subprocess.run([FIBERCTL, "-s", sock, *args], capture_output=True, text=True,
                          timeout=30)


def http(url, method="GET", headers=None):
    """(status, body) of one request, without following redirects."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    req = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_refusals(base, port, token):
    cookie = {"Cookie": "fiberd_web_token_%d=%s" % (port, token)}
    cases = [
        ("/ without the token", base + "/", "GET", {}, 403),
        ("/api/stats without the token", base + "/api/stats", "GET", {}, 403),
        ("a wrong token", base + "/api/stats?token=" + "0" * 32, "GET", {}, 403),
        ("a foreign Host", base + "/api/stats", "GET",
         {"X-Fiberd-Token": token, "Host": "evil.example:%d" % port}, 403),
        ("a cross-origin POST", base + "/api/cancel?id=1", "POST",
         dict(cookie, Origin="http://evil.example"), 403),
        ("a POST with the cookie and no Origin", base + "/api/cancel?id=1", "POST", cookie, 403),
        ("a same-origin POST from the page opened as localhost (taken: the job is unknown)",
         base + "/api/cancel?id=999999", "POST",
         dict(cookie, Host="localhost:%d" % port, Origin="http://localhost:%d" % port), 404),
        ("a POST whose Origin is the other name of the page's host",
         base + "/api/cancel?id=999999", "POST",
         dict(cookie, Host="127.0.0.1:%d" % port, Origin="http://localhost.evil:%d" % port), 403),
        ("DELETE", base + "/", "DELETE", cookie, 405),
        ("cancel by GET", base + "/api/cancel?id=1", "GET", cookie, 405),
        ("the token header", base + "/api/stats", "GET", {"X-Fiberd-Token": token}, 200),
        ("the URL's token", base + "/?token=" + token, "GET", {}, 303),
    ]
    for what, url, method, headers, want in cases:
        status, _ = http(url, method, headers)
        assert status == want, "%s: HTTP %d, expected %d" % (what, status, want)
    print("check-web: %d requests refused or taken as they should be" % len(cases))


def main():
    tmp = tempfile.mkdtemp(prefix="fiberd-web-")
    sock = os.path.join(tmp, "fiberd.sock")
    env = dict(os.environ, STATE_DIRECTORY=tmp)
    procs = []
    driver = None
    try:
        fiberd = subprocess.Popen([FIBERD, "--config", "/dev/null", "--socket", sock,
                                   "--plugin-dir", PLUGINS, "--workers", "2",
                                   "--log-level", "warning"],
                                  stderr=open(os.path.join(tmp, "fiberd.log"), "w"), env=env)
        procs.append(fiberd)
        wait_for("fiberd to answer", lambda: fiberd.poll() is None and
                 ctl(sock, "ping").returncode == 0)

        web = subprocess.Popen([FIBERCTL, "-s", sock, "--json", "web"], stdout=subprocess.PIPE,
                               text=True)
        procs.append(web)
        info = json.loads(web.stdout.readline())
        url, port, token = info["url"], info["port"], info["token"]
        base = "http://127.0.0.1:%d" % port
        assert url == base + "/?token=" + token and len(token) == 32, info
        check_refusals(base, port, token)

        opts = webdriver.ChromeOptions()
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1440,1100",
                  "--user-data-dir=" + os.path.join(tmp, "chromium")):
            opts.add_argument(a)
        opts.binary_location = "/usr/bin/chromium"
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        driver.set_page_load_timeout(DEADLINE_S)
        driver.get(url)
        wait = WebDriverWait(driver, DEADLINE_S, poll_frequency=0.05)
        text = lambda id_: driver.find_element(By.ID, id_).text

        def click(css):
            # the table is redrawn every second: a row found just before may be gone
            def once(d):
                d.find_element(By.CSS_SELECTOR, css).click()
                return True
            WebDriverWait(driver, DEADLINE_S, poll_frequency=0.05,
                          ignored_exceptions=[StaleElementReferenceException]).until(once)

        # loaded: the redirect dropped the token from the address, the counts are in
        assert driver.current_url == base + "/", driver.current_url
        wait.until(lambda d: text("count-done") == "0" and text("count-queued") == "0")
        wait.until(lambda d: "fiberd" in text("who") and sock in text("who"))
        assert driver.execute_script("return typeof Chart") == "function", "no Chart.js"
        print("check-web: the page loaded with its counts: " + text("who"))

        # live: jobs submitted elsewhere show up in the counts and the graph
        for i in range(5):
            assert ctl(sock, "submit", "echo", "n=%d" % i).returncode == 0
        wait.until(lambda d: text("count-done") == "5")
        graph = driver.find_element(By.ID, "throughput")
        wait.until(lambda d: int(graph.get_attribute("data-finished") or 0) >= 5)
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs tbody tr")) == 5)
        print("check-web: 5 jobs came in live (counts, graph, table)")

        # cancel from the page: a 60 s sleep, running, cancelled by its button
        r = ctl(sock, "submit", "sleep", "ms=60000")
        job = r.stdout.strip()
        assert r.returncode == 0 and job.isdigit(), r
        row = '#jobs tr[data-id="%s"]' % job
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row + '[data-state="running"]'))
        click(row)   # its detail
        wait.until(lambda d: text("detail-id") == job and '"ms": 60000' in text("detail-args"))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#latency-group")
                   and int(d.find_element(By.TAG_NAME, "body").get_attribute("data-ticks")) > 5)
        driver.save_screenshot(SHOT)  # a running job, its detail and its cancel button
        click(row + " button.cancel")
        status = wait_for("job %s to end cancelled" % job, lambda: json.loads(
            ctl(sock, "--json", "status", job).stdout or "{}").get("state") == "cancelled")
        assert status
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row + '[data-state="cancelled"]'))
        wait.until(lambda d: text("count-cancelled") == "1")
        print("check-web: job %s cancelled from the page; fiberctl says cancelled" % job)

        # and retried from the page: cancelled jobs may be queued again
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, row + " button.retry"))
        click(row + " button.retry")
        wait_for("job %s to run again" % job, lambda: json.loads(
            ctl(sock, "--json", "status", job).stdout or "{}").get("state") == "running")
        ctl(sock, "cancel", job)
        print("check-web: job %s retried from the page" % job)
        logs = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert not logs, "the page's console: %s" % logs
        print("check-web: screenshot in " + SHOT)
    finally:
        if driver:
            driver.quit()
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    assert web.returncode == 0, "fiberctl web exited %d" % web.returncode
    print("check-web: ok")


if __name__ == "__main__":
    main()
