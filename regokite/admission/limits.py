"""What one admission worker allows each client connection (admission.connections enforces them).

Apart from connections.py, which imports uvicorn and the metrics: `regokite admission`'s parser reads the
defaults here for its flags, and no parser may import prometheus_client (tests/commands/test_cli.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    handshake_timeout: float = 5.0
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 1000
    max_requests: int = 1000
    max_header_bytes: int = 64 * 1024
