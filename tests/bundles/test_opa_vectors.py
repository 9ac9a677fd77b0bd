"""Signature verification and digests against OPA's own test vectors (v1/bundle/verify_test.go, OPA's
repository): tokens OPA signed and the digest OPA computed, checked by regokite's code."""

from __future__ import annotations

import pytest

from regokite.bundles.config import Key, Signing
from regokite.bundles.signing import SignatureError, file_digest, verified_files

# the `files` claims of OPA's test tokens, signed with HS256 ("secret") and RS256 (the key below)
CLAIMS = (
    "eyJmaWxlcyI6W3sibmFtZSI6ImRiL3VhbTIvZW50aXRsZW1lbnRzL2RhdGEuanNvbiIsImhhc2giOiJjMjEzMTU0NGM3MTZhMjVhNWUzMW"
    "Y1MDQzMDBmNTI0MGU4MjM1Y2FkYjlhNTdmMGJkMWI2ZjRiZDc0YjI2NjEyIiwiYWxnb3JpdGhtIjoic2hhMjU2In0seyJuYW1lIjoiZGIv"
    "dWFtMi9wb2xpY3kvb3BhLXBvbGljeS5yZWdvIiwiaGFzaCI6IjQyY2ZlNjc2OGI1N2JiNWY3NTAzYzE2NWMyOGRkMDdhYzViODEzNTU0ZW"
    "JjODUwZjJjYzM1ODQzZTcxMzdiMWQifV0sImlhdCI6MTU5MjI"
)
HS256_KID_FOO = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6ImZvbyJ9."
    + CLAIMS
    + "0ODAyNywiaXNzIjoiSldUU2VydmljZSIsInNjb3BlIjoid3JpdGUifQ.u7b_h88osJpU6VQLhIUmZjblsPNCO_kTqsVtpEAHavs"
)
HS256_KID_BAR = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6ImJhciJ9."
    + CLAIMS
    + "0ODAyNywiaXNzIjoiSldUU2VydmljZSIsInNjb3BlIjoid3JpdGUifQ.xW04tph2-dSy47uZ-CgiObvFWFLUsMym8N7ermgPZ0s"
)
HS256_KEYID_CLAIM = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + CLAIMS
    + "0ODAyNywiaXNzIjoiSldUU2VydmljZSIsImtleWlkIjoiZm9vIiwic2NvcGUiOiJ3cml0ZSJ9."
    + "4nrInalqppAc9EjsNUD9Y35amVpDGoRk4bkxzdY8fhs"
)
RS256_KID_FOO = (
    "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6ImZvbyJ9."
    + CLAIMS
    + "1MTQwNiwiaXNzIjoiSldUU2VydmljZSIsInNjb3BlIjoid3JpdGUifQ.UZcX_Qj29o213nwZ5mysiyNcgAp1AOqCkDLkj1KGZ7Cw3l17TbkF8t3"
    "FJd654sf762NGcABA0WQ2zxq-labXl_d5TKQmq23lurO3qLHI1cKQPyoxPbddGo78sJpMwWsiMyEYcyyKC9FpNUpa8cT81GPo4q9Zui8TAD0wtH"
    "h2YxBL7E8QYLJxcLMJTJxVBgrQGLXFT7vYRc6hJz9Vu-i0SWuLBGxOCmYoHr4DWFfy0IhAbhiUFyLRpukfBPjCJNYY5LgaZdN6LaYivtIEUms5j"
    "UuXubBimLJm7KOT5-bgJMXTcUsbrbl2Ma7PwG5IOKjjgyEvH8KVfGFZSzNrpuxKmA"
)
RSA_PUBLIC = """-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA9KaakMv1XKKDaSch3PFR
3a27oaHp1GNTTNqvb1ZaHZXp+wuhYDwc/MTE67x9GCifvQBWzEGorgTq7aisiOyl
vKifwz6/wQ+62WHKG/sqKn2Xikp3P63aBIPlZcHbkyyRmL62yeyuzYoGvLEYel+m
z5SiKGBwviSY0Th2L4e5sGJuk2HOut6emxDi+E2Fuuj5zokFJvIT6Urlq8f3h6+l
GeR6HUOXqoYVf7ff126GP7dticTVBgibxkkuJFmpvQSW6xmxruT4k6iwjzbZHY7P
ypZ/TdlnuGC1cOpAVyU7k32IJ9CRbt3nwEf5U54LRXLLQjFixWZHwKdDiMTF4ws0
+wIDAQAB
-----END PUBLIC KEY-----"""
FILES = ["db/uam2/entitlements/data.json", "db/uam2/policy/opa-policy.rego"]
HS = {"foo": Key("foo", "HS256", "secret")}


@pytest.mark.parametrize(
    ("token", "keys", "signing"),
    [
        (RS256_KID_FOO, {"foo": Key("foo", "RS256", RSA_PUBLIC)}, Signing(scope="write")),
        (HS256_KID_FOO, HS, Signing(scope="write")),
        (HS256_KEYID_CLAIM, HS, Signing(scope="write")),  # the payload's (deprecated) keyid claim names the key
        (HS256_KID_BAR, HS, Signing(keyid="foo", scope="write")),  # the configured keyid wins over the kid
    ],
)
def test_opas_tokens_verify(token: str, keys: dict, signing: Signing) -> None:
    assert sorted(verified_files(token, signing, keys, "b")) == FILES


@pytest.mark.parametrize(
    ("token", "keys", "signing", "said"),
    [
        (HS256_KID_FOO, {"foo": Key("foo", "HS256", "bad_secret")}, Signing(scope="write"), "failed to verify"),
        (HS256_KID_FOO, HS, Signing(scope="bad_scope"), "scope mismatch"),
        (HS256_KID_FOO, {}, Signing(), "verification key corresponding to ID foo not found"),
        (HS256_KID_BAR, HS, Signing(scope="write"), "key corresponding to ID bar not found"),
    ],
)
def test_opas_tokens_refused_as_opa_refuses_them(token: str, keys: dict, signing: Signing, said: str) -> None:
    with pytest.raises(SignatureError, match=said):
        verified_files(token, signing, keys, "b")


def test_opas_digest_of_a_manifest() -> None:
    """verify_test.go's bad_digest case: OPA's MD5 of `{"revision": "quickbrownfaux"}` in its normal form."""
    assert file_digest("/.manifest", b'{"revision": "quickbrownfaux"}', "MD5") == "a005c38a509dc2d5a7407b9494efb2ad"
