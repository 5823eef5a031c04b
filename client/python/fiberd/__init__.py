# SPDX-License-Identifier: MIT
"""fiberd's Python client: see fiberd.client (Client, FiberdError)."""
from fiberd.client import CODES, Client, FiberdError, default_socket, job_options

__all__ = ["CODES", "Client", "FiberdError", "default_socket", "job_options"]
