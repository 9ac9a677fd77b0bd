"""net.lookup_ip_addr beside OPA's evaluator (tests/opa_oracle.py) on names this machine resolves
without a network (addresses, localhost); refused at load on the code before."""

from __future__ import annotations

from typing import Any

import opa_oracle
import pytest


@pytest.mark.parametrize(
    "name",
    ["10.0.0.0", "::", "::1", "::ffff:1.2.3.4", "2001:db8::1", "localhost", "127.0.0.1", "", "no such host.invalid", 1],
)
def test_lookup_ip_addr_answers_as_opa(name: Any) -> None:
    mine, opa = opa_oracle.both("package p\n\nx := net.lookup_ip_addr(input)\n", name)
    assert mine == opa
