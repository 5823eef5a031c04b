# SPDX-License-Identifier: MIT
"""fiberd's Python client: fiberd.client (Client, FiberdError, Fd), and fiberd.aio, the
same calls for asyncio."""
from fiberd.client import CODES, Client, Fd, FiberdError, default_socket, job_options

# The release of fiberd this package comes with (ipc/protocol.h's FIBERD_VERSION;
# tests/python checks that they agree). pyproject.toml reads it from here.
__version__ = "0.1.0"

__all__ = ["CODES", "Client", "Fd", "FiberdError", "__version__", "default_socket",
           "job_options"]
