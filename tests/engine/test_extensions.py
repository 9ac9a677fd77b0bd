"""Every extension builtin against real OPA (OPA 1.20's Go engine through
opa_bindings) on the same operands: the same value, or an error in both.

Certificates, keys and tokens are made here with `cryptography`; operands go
through `input` so OPA's type checker leaves the error cases to evaluation.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import os
from typing import Any

import pytest
import regorus
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from opa_bindings import OpaEngine
from opa_bindings.engine import OpaError

from regokite.engine.extensions import ExtensionOptions, install, provided
from regokite.engine.extensions.common import big_number
from regokite.ops.tls import CA_KEY_USAGE

os.environ.setdefault("RUST_LIB_BACKTRACE", "0")

ERROR = "<error>"


def _regorus(expr: str, input: Any) -> Any:
    engine = regorus.Engine()
    install(engine, ExtensionOptions())
    engine.add_policy("t.rego", f"package t\n\nx := {expr}\n")
    engine.set_input(input)
    try:
        return json.loads(engine.eval_rule_as_json("data.t.x"))
    except RuntimeError:
        return ERROR


_OPA = OpaEngine()


def _opa(expr: str, input: Any) -> Any:
    try:
        results = _OPA.eval_query(f"x := {expr}", input)
    except OpaError as exc:
        assert exc.code == "eval_error", exc
        return ERROR
    return _normalise(results[0]["x"]) if results else "<undefined>"


def _normalise(value: Any) -> Any:
    """OPA's exact big integers as regorus can hold them (see common.big_number)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return big_number(value)
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


def assert_same(expr: str, **input: Any) -> Any:
    expected = _opa(expr, input)
    assert _regorus(expr, input) == expected, expr
    return expected


# --- material ---------------------------------------------------------------

NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "Platform"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _cert(subject: str, key: Any, issuer: x509.Certificate | None, signer: Any, *, ca: bool, **kw: Any) -> Any:
    before, after = (
        kw.get("before", NOW - datetime.timedelta(days=1)),
        kw.get("after", NOW + datetime.timedelta(days=30)),
    )
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer.subject if issuer else _name(subject))
        .public_key(key.public_key())
        .serial_number(kw.get("serial", 4242))
        .not_valid_before(before)
        .not_valid_after(after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca and issuer else None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(CA_KEY_USAGE, critical=True)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("svc.example.com"),
                    x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
                    x509.IPAddress(ipaddress.ip_address("fd00::1")),
                    x509.UniformResourceIdentifier("spiffe://cluster.local/ns/default/sa/web"),
                    x509.RFC822Name("ops@example.com"),
                ]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.public_key()), critical=False
        )
    return builder.sign(signer, None if isinstance(signer, ed25519.Ed25519PrivateKey) else hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


ROOT_KEY = ec.generate_private_key(ec.SECP256R1())
ROOT = _cert("root", ROOT_KEY, None, ROOT_KEY, ca=True, serial=2**100 + 7)
MID_KEY = ec.generate_private_key(ec.SECP384R1())
MID = _cert("intermediate", MID_KEY, ROOT, ROOT_KEY, ca=True)
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
LEAF = _cert("svc.example.com", RSA_KEY, MID, MID_KEY, ca=False)
ED_KEY = ed25519.Ed25519PrivateKey.generate()
ED_LEAF = _cert("ed.example.com", ED_KEY, ROOT, ROOT_KEY, ca=False)
EXPIRED = _cert("old", RSA_KEY, ROOT, ROOT_KEY, ca=False, after=NOW - datetime.timedelta(hours=1))
OTHER_ROOT_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_ROOT = _cert("root", OTHER_ROOT_KEY, None, OTHER_ROOT_KEY, ca=True)


# --- hashes -----------------------------------------------------------------


@pytest.mark.parametrize("fn", ["crypto.md5", "crypto.sha1", "crypto.sha256"])
@pytest.mark.parametrize("value", ["", "abc", "ünïcødé ✓", 7, None])
def test_digests(fn, value):
    assert_same(f"{fn}(input.v)", v=value)


@pytest.mark.parametrize("fn", ["crypto.hmac.md5", "crypto.hmac.sha1", "crypto.hmac.sha256", "crypto.hmac.sha512"])
@pytest.mark.parametrize(("message", "key"), [("hello", "secret"), ("", ""), ("ä", "ключ"), ("x", 1)])
def test_hmacs(fn, message, key):
    assert_same(f"{fn}(input.m, input.k)", m=message, k=key)


@pytest.mark.parametrize(("a", "b"), [("abc", "abc"), ("abc", "abd"), ("", ""), ("a", 1)])
def test_hmac_equal(a, b):
    assert_same("crypto.hmac.equal(input.a, input.b)", a=a, b=b)


@pytest.mark.parametrize("value", [[1, [2, [3, [4]]], [], "s", {"a": [1]}], [], "s", None])
def test_array_flatten(value):
    assert_same("array.flatten(input.v)", v=value)


# --- networks ---------------------------------------------------------------


@pytest.mark.parametrize(
    "addresses",
    [
        ["10.0.0.0/25", "10.0.0.128/25"],
        ["192.168.1.4", "192.168.1.5", "192.168.1.6/31", "10.1.2.3/8"],
        ["2001:db8::/33", "2001:db8:8000::/33", "::1", "10.0.0.0/8"],
        [],
        ["10.0.0.0/33"],
        ["not an address"],
        [1],
        "10.0.0.0/8",
    ],
)
def test_cidr_merge(addresses):
    assert_same("net.cidr_merge(input.a)", a=addresses)


def test_cidr_merge_of_a_set():
    assert_same('net.cidr_merge({"10.0.0.0/25", "10.0.0.128/25", "fd00::/8"})')


@pytest.mark.parametrize(
    ("cidrs", "targets"),
    [
        ("10.0.0.0/8", "10.1.2.3"),
        ("10.0.0.0/8", "11.1.2.3"),
        (["10.0.0.0/8", "192.168.0.0/16"], ["10.0.0.1", "192.168.1.0/24", "172.16.0.1"]),
        ({"private": "10.0.0.0/8", "v6": ["fd00::/8", "extra"]}, {"a": "10.0.0.0/9", "b": "fd00::1"}),
        ([["10.0.0.0/8", "tag"]], ["10.0.0.1", ["10.2.0.0/16", "x"]]),
        ("10.0.0.0/8", "bad"),
        (["10.0.0.0/8"], [7]),
        (1, "10.0.0.1"),
    ],
)
def test_cidr_contains_matches(cidrs, targets):
    assert_same("net.cidr_contains_matches(input.c, input.t)", c=cidrs, t=targets)


def test_cidr_contains_matches_of_sets():
    assert_same('net.cidr_contains_matches({"10.0.0.0/8", "fd00::/8"}, {"10.0.0.1", "fd00::2", "1.1.1.1"})')


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("10.0.0.0/8", "10.1.0.0/16"),
        ("10.0.0.0/16", "10.1.0.0/16"),
        ("fd00::/8", "fd12::/16"),
        ("10.0.0.0/8", "fd00::/8"),
        ("10.0.0.1", "10.0.0.0/8"),
        ("10.0.0.0/8", "bad"),
    ],
)
def test_cidr_intersects(a, b):
    assert_same("net.cidr_intersects(input.a, input.b)", a=a, b=b)


# --- certificates -----------------------------------------------------------


def _der_b64(*certs: x509.Certificate) -> str:
    return base64.b64encode(b"".join(c.public_bytes(serialization.Encoding.DER) for c in certs)).decode()


@pytest.mark.parametrize(
    "text",
    [
        _pem(ROOT),
        _pem(LEAF),
        _pem(ED_LEAF),
        _pem(ROOT) + _pem(MID) + _pem(LEAF),
        _der_b64(ROOT, LEAF),
        base64.b64encode(_pem(MID).encode()).decode(),
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
        RSA_KEY.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode(),
        "not base64!",
        base64.b64encode(b"garbage").decode(),
        "",
    ],
    ids=[
        "root",
        "rsa-leaf",
        "ed25519-leaf",
        "chain",
        "der",
        "base64-pem",
        "bad-der",
        "public-key",
        "junk",
        "b64-junk",
        "empty",
    ],
)
def test_parse_certificates(text):
    assert_same("crypto.x509.parse_certificates(input.t)", t=text)


@pytest.mark.parametrize(
    "text",
    [
        _pem(ROOT) + _pem(MID) + _pem(LEAF),
        _pem(ROOT) + _pem(ED_LEAF),
        _pem(LEAF) + _pem(MID) + _pem(ROOT),
        _pem(OTHER_ROOT) + _pem(MID) + _pem(LEAF),
        _pem(ROOT) + _pem(LEAF),
        _pem(ROOT) + _pem(EXPIRED),
        _pem(ROOT),
        "junk",
    ],
    ids=["chain", "direct", "reversed", "wrong-root", "missing-intermediate", "expired", "single", "junk"],
)
def test_parse_and_verify_certificates(text):
    assert_same("crypto.x509.parse_and_verify_certificates(input.t)", t=text)


# --- JWT --------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _token(alg: str, payload: dict[str, Any], key: Any, **header: Any) -> str:
    head = _b64url(json.dumps({"alg": alg, "typ": "JWT", **header}).encode())
    body = _b64url(json.dumps(payload).encode())
    signed = f"{head}.{body}".encode()
    family, bits = alg[:2], alg[2:]
    digest = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}.get(bits)
    if family == "HS":
        signature = hmac.new(key, signed, getattr(hashlib, f"sha{bits}")).digest()
    elif family == "RS":
        signature = key.sign(signed, padding.PKCS1v15(), digest())
    elif family == "PS":
        signature = key.sign(signed, padding.PSS(padding.MGF1(digest()), padding.PSS.DIGEST_LENGTH), digest())
    elif family == "ES":
        r, s = decode_dss_signature(key.sign(signed, ec.ECDSA(digest())))
        size = (key.curve.key_size + 7) // 8
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    else:
        signature = key.sign(signed)
    return f"{head}.{body}.{_b64url(signature)}"


def _public_pem(key: Any) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def _jwk(key: Any, **extra: Any) -> dict[str, Any]:
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        n = public.public_numbers()
        size = (n.n.bit_length() + 7) // 8
        return {"kty": "RSA", "n": _b64url(n.n.to_bytes(size, "big")), "e": _b64url(n.e.to_bytes(3, "big")), **extra}
    n = public.public_numbers()
    size = (public.curve.key_size + 7) // 8
    return {
        "kty": "EC",
        "crv": "P-256",
        "x": _b64url(n.x.to_bytes(size, "big")),
        "y": _b64url(n.y.to_bytes(size, "big")),
        **extra,
    }


EC_KEY = ec.generate_private_key(ec.SECP256R1())
EC384_KEY = ec.generate_private_key(ec.SECP384R1())
OTHER_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
CLAIMS = {"sub": "alice", "iss": "https://issuer", "aud": ["api", "web"], "exp": 4102444800, "nbf": 1000, "n": 1.5}
SECRET = b"s3cr3t"

TOKENS = {
    "RS256": _token("RS256", CLAIMS, RSA_KEY),
    "RS384": _token("RS384", CLAIMS, RSA_KEY),
    "RS512": _token("RS512", CLAIMS, RSA_KEY),
    "PS256": _token("PS256", CLAIMS, RSA_KEY),
    "PS384": _token("PS384", CLAIMS, RSA_KEY),
    "PS512": _token("PS512", CLAIMS, RSA_KEY),
    "ES256": _token("ES256", CLAIMS, EC_KEY),
    "ES384": _token("ES384", CLAIMS, EC384_KEY),
    "HS256": _token("HS256", CLAIMS, SECRET),
    "HS384": _token("HS384", CLAIMS, SECRET),
    "HS512": _token("HS512", CLAIMS, SECRET),
    "EdDSA": _token("EdDSA", CLAIMS, ED_KEY),
}
PUBLIC = {"RS": _public_pem(RSA_KEY), "PS": _public_pem(RSA_KEY), "ES": _public_pem(EC_KEY), "Ed": _public_pem(ED_KEY)}
PUBLIC["ES384"] = _public_pem(EC384_KEY)
MALFORMED = [
    "",
    "abc",
    "a.b",
    "a.b.c.d",
    "!!.e30.",
    _b64url(b"[1]") + ".e30.",
    _b64url(b'{"alg":"HS256"}') + ".bm90IGpzb24.",
    5,
]


@pytest.mark.parametrize(
    "token", list(TOKENS.values()) + MALFORMED, ids=list(TOKENS) + [f"malformed-{i}" for i in range(len(MALFORMED))]
)
def test_decode(token):
    assert_same("io.jwt.decode(input.t)", t=token)


def test_decode_of_a_nested_token():
    inner = TOKENS["HS256"]
    outer = _token("HS256", {}, SECRET, cty="JWT").split(".")
    outer[1] = _b64url(json.dumps(inner).encode())
    assert_same("io.jwt.decode(input.t)", t=".".join(outer))


def _key_for(alg: str) -> str:
    if alg.startswith("HS"):
        return SECRET.decode()
    return PUBLIC.get(alg) or PUBLIC[alg[:2]]


@pytest.mark.parametrize("alg", sorted(TOKENS))
def test_verify_accepts_its_own_key_and_refuses_others(alg):
    fn = f"io.jwt.verify_{alg.lower()}"
    assert assert_same(f"{fn}(input.t, input.k)", t=TOKENS[alg], k=_key_for(alg)) is True
    wrong = "other" if alg.startswith("HS") else _public_pem(OTHER_RSA)
    assert assert_same(f"{fn}(input.t, input.k)", t=TOKENS[alg], k=wrong) is False
    for other in ("RS256", "ES256", "HS256"):
        if other != alg:
            assert_same(f"{fn}(input.t, input.k)", t=TOKENS[other], k=_key_for(alg))


@pytest.mark.parametrize(
    "key",
    [
        _pem(LEAF),
        json.dumps(_jwk(RSA_KEY)),
        json.dumps({"keys": [_jwk(OTHER_RSA, kid="b"), _jwk(RSA_KEY, kid="a", alg="RS256")]}),
        json.dumps({"keys": [_jwk(RSA_KEY, alg="RS512")]}),
        json.dumps({"keys": []}),
        "not a key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        _pem(LEAF) + "trailing",
    ],
    ids=["cert", "jwk", "jwks-kid", "jwks-other-alg", "jwks-empty", "junk", "private-pem", "bad-cert", "trailing"],
)
def test_verify_rs256_key_forms(key):
    assert_same("io.jwt.verify_rs256(input.t, input.k)", t=TOKENS["RS256"], k=key)


@pytest.mark.parametrize("token", MALFORMED)
@pytest.mark.parametrize("fn", ["io.jwt.verify_rs256", "io.jwt.verify_es256", "io.jwt.verify_hs256"])
def test_verify_malformed_tokens(fn, token):
    assert_same(f"{fn}(input.t, input.k)", t=token, k=_key_for(fn[-5:].upper()))


NOW_NS = 1_700_000_000 * 10**9


@pytest.mark.parametrize(
    ("alg", "constraints"),
    [
        ("RS256", {"cert": PUBLIC["RS"], "time": NOW_NS}),
        ("RS256", {"cert": _pem(LEAF), "alg": "RS256", "iss": "https://issuer", "aud": "api", "time": NOW_NS}),
        ("RS256", {"cert": PUBLIC["RS"], "alg": "RS512", "time": NOW_NS}),
        ("RS256", {"cert": PUBLIC["RS"], "iss": "someone else", "time": NOW_NS}),
        ("RS256", {"cert": PUBLIC["RS"], "aud": "other", "time": NOW_NS}),
        ("RS256", {"cert": PUBLIC["RS"], "time": 4102444800 * 10**9}),
        ("RS256", {"cert": PUBLIC["RS"], "time": 10}),
        ("RS256", {"cert": _public_pem(OTHER_RSA), "time": NOW_NS}),
        ("RS256", {"cert": json.dumps({"keys": [_jwk(RSA_KEY, kid="k1")]}), "time": NOW_NS}),
        ("ES256", {"cert": PUBLIC["ES"], "time": NOW_NS}),
        ("PS384", {"cert": PUBLIC["PS"], "time": NOW_NS}),
        ("EdDSA", {"cert": PUBLIC["Ed"], "time": NOW_NS}),
        ("HS256", {"secret": SECRET.decode(), "aud": "web", "time": NOW_NS}),
        ("HS256", {"secret": "wrong", "time": NOW_NS}),
        ("HS256", {"time": NOW_NS}),
        ("HS256", {"secret": "x", "cert": PUBLIC["RS"], "time": NOW_NS}),
        ("HS256", {"secret": SECRET.decode(), "color": "red"}),
        ("HS256", {"secret": SECRET.decode(), "time": -1}),
        ("HS256", {"secret": SECRET.decode(), "time": "now"}),
        ("HS256", {"cert": "junk"}),
    ],
)
def test_decode_verify(alg, constraints):
    assert_same("io.jwt.decode_verify(input.t, input.c)", t=TOKENS[alg], c=constraints)


@pytest.mark.parametrize(
    "claims", [{"aud": "api"}, {}, {"exp": "soon"}, {"nbf": 2000000000}, {"exp": 1600000000}, {"iss": "https://issuer"}]
)
def test_decode_verify_claims(claims):
    token = _token("HS256", claims, SECRET)
    assert_same("io.jwt.decode_verify(input.t, input.c)", t=token, c={"secret": SECRET.decode(), "time": NOW_NS})
    assert_same("io.jwt.decode_verify(input.t, input.c)", t=token, c={"secret": "s", "aud": "api", "time": NOW_NS})


@pytest.mark.parametrize("token", MALFORMED)
def test_decode_verify_malformed(token):
    assert_same("io.jwt.decode_verify(input.t, input.c)", t=token, c={"secret": "s", "time": NOW_NS})


def test_provided_names_every_installed_builtin_and_http_send_only_when_allowed():
    assert "http.send" not in provided(ExtensionOptions())
    assert "http.send" in provided(ExtensionOptions(http_send_hosts=("127.0.0.1",)))
    assert {"crypto.sha256", "io.jwt.decode_verify", "net.cidr_merge"} <= provided(ExtensionOptions())


def test_a_builtin_result_no_engine_may_take_is_an_error_not_a_crash() -> None:
    # A JWT payload is attacker-chosen JSON: a lone surrogate in it segfaulted
    # regorus when io.jwt.decode handed it back. (OPA substitutes U+FFFD; an
    # error is the fail-closed answer here.)
    header, payload = _b64url(b'{"alg": "none"}'), _b64url(b'{"sub": "\\ud800"}')
    token = f"{header}.{payload}."
    engine = regorus.Engine()
    install(engine, ExtensionOptions())
    engine.add_policy("t.rego", "package t\n\nx := io.jwt.decode(input.t)\n")
    engine.set_input({"t": token})
    with pytest.raises(RuntimeError, match=r"io\.jwt\.decode result\[1\]\.sub: string holds a lone surrogate"):
        engine.eval_rule_as_json("data.t.x")
