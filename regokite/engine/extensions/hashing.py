"""crypto.md5/sha1/sha256 and crypto.hmac.*: hex digests of UTF-8 strings, as OPA."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

from regokite.engine.extensions.common import builtin, string_operand

_ALGORITHMS = {"md5": hashlib.md5, "sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}


def _digest(name: str, algorithm: str) -> Callable[[object], str]:
    def digest(value: object) -> str:
        return _ALGORITHMS[algorithm](string_operand(name, value, 1).encode()).hexdigest()

    return digest


def _hmac(name: str, algorithm: str) -> Callable[[object, object], str]:
    def mac(message: object, key: object) -> str:
        text = string_operand(name, message, 1).encode()
        secret = string_operand(name, key, 2).encode()
        return hmac.new(secret, text, _ALGORITHMS[algorithm]).hexdigest()

    return mac


@builtin("crypto.hmac.equal")
def _hmac_equal(mac1: object, mac2: object) -> bool:
    first = string_operand("crypto.hmac.equal", mac1, 1)
    second = string_operand("crypto.hmac.equal", mac2, 2)
    return hmac.compare_digest(first.encode(), second.encode())


for _algorithm in ("md5", "sha1", "sha256"):
    builtin(f"crypto.{_algorithm}")(_digest(f"crypto.{_algorithm}", _algorithm))
for _algorithm in ("md5", "sha1", "sha256", "sha512"):
    builtin(f"crypto.hmac.{_algorithm}")(_hmac(f"crypto.hmac.{_algorithm}", _algorithm))
