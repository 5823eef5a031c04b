# SPDX-License-Identifier: MIT
"""Fixtures for the Python client's tests (`make check-python`): a real fiberd, started
per test module on a temp socket with the built plugins. make passes the paths in
FIBERD_BIN and FIBERD_PLUGIN_DIR (defaults: build/fiberd, build/plugins), and in
FIBERD_TEST_PLUGINS the test plugins to load beside them, colon-separated (default:
build/tests/plugins/log_lines.so, which the job log tests use)."""
import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TOP, "client", "python"))

from fiberd import Client, FiberdError  # noqa: E402


@pytest.fixture(scope="module")
def fiberd(tmp_path_factory):
    """The socket path of a fiberd that runs for the module's tests."""
    tmp = tmp_path_factory.mktemp("fiberd")
    sock = str(tmp / "fiberd.sock")
    log = open(tmp / "log", "w+")
    binary = os.environ.get("FIBERD_BIN", os.path.join(TOP, "build", "fiberd"))
    bundled = os.environ.get("FIBERD_PLUGIN_DIR", os.path.join(TOP, "build", "plugins"))
    extra = os.environ.get("FIBERD_TEST_PLUGINS",
                           os.path.join(TOP, "build", "tests", "plugins", "log_lines.so"))
    plugins = str(tmp / "plugins")  # copies: fiberd loads no symlink
    os.mkdir(plugins)
    for so in [os.path.join(bundled, f) for f in os.listdir(bundled) if f.endswith(".so")] + \
            [p for p in extra.split(":") if p]:
        shutil.copy(so, plugins)
    env = dict(os.environ, STATE_DIRECTORY=str(tmp))  # its job store: not /var/lib/fiberd
    proc = subprocess.Popen([binary, "--config", "/dev/null", "--socket", sock, "--plugin-dir", plugins,
                             "--workers", "1", "--log-level", "warning"], stderr=log, env=env)
    try:
        for _ in range(500):  # wait for it to answer, not for a fixed time
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail("fiberd exited: " + log.read())
            try:
                with Client(sock) as c:
                    c.ping(timeout=5)
                break
            except FiberdError:
                time.sleep(0.02)
        else:
            pytest.fail("fiberd did not answer on " + sock)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture
def client(fiberd):
    with Client(fiberd, timeout=30) as c:
        yield c
