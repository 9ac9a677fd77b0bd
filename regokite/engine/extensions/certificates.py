"""crypto.x509.parse_certificates and parse_and_verify_certificates, shaped as OPA
returns them: Go's x509.Certificate as encoding/json writes it (plus URIStrings)."""

from __future__ import annotations

import datetime
import re
from typing import Any
from urllib.parse import unquote, urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtensionOID

from regokite.engine.extensions.common import BuiltinError, b64, base64_std_decode, big_number, builtin, string_operand

_PEM_BLOCK = re.compile(rb"-----BEGIN ([^-\r\n]*)-----\r?\n(.*?)-----END \1-----", re.DOTALL)

# Go's x509.SignatureAlgorithm and PublicKeyAlgorithm enumerations.
_SIGNATURE_ALGORITHMS = {
    "1.2.840.113549.1.1.2": 1,
    "1.2.840.113549.1.1.4": 2,
    "1.2.840.113549.1.1.5": 3,
    "1.2.840.113549.1.1.11": 4,
    "1.2.840.113549.1.1.12": 5,
    "1.2.840.113549.1.1.13": 6,
    "1.2.840.10040.4.3": 7,
    "2.16.840.1.101.3.4.3.2": 8,
    "1.2.840.10045.4.1": 9,
    "1.2.840.10045.4.3.2": 10,
    "1.2.840.10045.4.3.3": 11,
    "1.2.840.10045.4.3.4": 12,
    "1.3.101.112": 16,
}
_PSS_BY_HASH = {"sha256": 13, "sha384": 14, "sha512": 15}
_EXT_KEY_USAGES = {
    "2.5.29.37.0": 0,
    "1.3.6.1.5.5.7.3.1": 1,
    "1.3.6.1.5.5.7.3.2": 2,
    "1.3.6.1.5.5.7.3.3": 3,
    "1.3.6.1.5.5.7.3.4": 4,
    "1.3.6.1.5.5.7.3.5": 5,
    "1.3.6.1.5.5.7.3.6": 6,
    "1.3.6.1.5.5.7.3.7": 7,
    "1.3.6.1.5.5.7.3.8": 8,
    "1.3.6.1.5.5.7.3.9": 9,
    "1.3.6.1.4.1.311.10.3.3": 10,
    "2.16.840.1.113730.4.1": 11,
    "1.3.6.1.4.1.311.2.1.22": 12,
    "1.3.6.1.4.1.311.61.1.1": 13,
}
_KEY_USAGE_BITS = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
)
# Extensions Go's parser understands; any other critical one is "unhandled".
_HANDLED = {
    "2.5.29.14",
    "2.5.29.15",
    "2.5.29.17",
    "2.5.29.19",
    "2.5.29.30",
    "2.5.29.31",
    "2.5.29.32",
    "2.5.29.33",
    "2.5.29.35",
    "2.5.29.36",
    "2.5.29.37",
    "2.5.29.54",
    "1.3.6.1.5.5.7.1.1",
}
_NAME_FIELDS = {
    "2.5.4.6": "Country",
    "2.5.4.10": "Organization",
    "2.5.4.11": "OrganizationalUnit",
    "2.5.4.7": "Locality",
    "2.5.4.8": "Province",
    "2.5.4.9": "StreetAddress",
    "2.5.4.17": "PostalCode",
}


def load_certificates(name: str, text: str) -> list[x509.Certificate]:
    """OPA's reading of a certificates operand: PEM, base64 of PEM, or base64 of DER."""
    data = text.encode()
    if not text.startswith("-----BEGIN"):
        data = base64_std_decode(text)
        if not data.startswith(b"-----BEGIN"):
            return _parse_der_sequence(data)
    der = b""
    for block in _PEM_BLOCK.finditer(data):
        if block[1] != b"CERTIFICATE":
            raise BuiltinError(f"{name}: PEM block type is '{block[1].decode()}', expected CERTIFICATE")
        der += base64_std_decode(block[2].decode())
    return _parse_der_sequence(der)


def _parse_der_sequence(der: bytes) -> list[x509.Certificate]:
    """Go's x509.ParseCertificates: DER certificates back to back."""
    certificates = []
    while der:
        length = _der_length(der)
        try:
            certificates.append(x509.load_der_x509_certificate(der[:length]))
        except ValueError as exc:
            raise BuiltinError(f"x509: malformed certificate: {exc}") from None
        der = der[length:]
    return certificates


def _der_length(der: bytes) -> int:
    if len(der) < 2 or der[0] != 0x30:
        raise BuiltinError("x509: malformed certificate")
    if der[1] < 0x80:
        return 2 + der[1]
    count = der[1] & 0x7F
    if count == 0 or len(der) < 2 + count:
        raise BuiltinError("x509: malformed certificate")
    return 2 + count + int.from_bytes(der[2 : 2 + count], "big")


def _oid(dotted: str) -> list[int]:
    return [int(part) for part in dotted.split(".")]


def _name(name: x509.Name) -> dict[str, Any]:
    result: dict[str, Any] = dict.fromkeys(_NAME_FIELDS.values())
    result |= {"CommonName": "", "SerialNumber": "", "Names": [], "ExtraNames": None}
    for attribute in name:
        oid, value = attribute.oid.dotted_string, attribute.value
        result["Names"].append({"Type": _oid(oid), "Value": value})
        if oid in _NAME_FIELDS:
            field = _NAME_FIELDS[oid]
            result[field] = [*(result[field] or []), value]
        elif oid == "2.5.4.3":
            result["CommonName"] = value
        elif oid == "2.5.4.5":
            result["SerialNumber"] = value
    return result


def _public_key(cert: x509.Certificate) -> tuple[int, Any]:
    key = cert.public_key()
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        return 1, {"N": big_number(numbers.n), "E": numbers.e}
    if isinstance(key, ec.EllipticCurvePublicKey):
        point = key.public_numbers()
        return 3, {"Curve": {}, "X": big_number(point.x), "Y": big_number(point.y)}
    if isinstance(key, ed25519.Ed25519PublicKey):
        return 4, b64(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
    return 0, None


def _signature_algorithm(cert: x509.Certificate) -> int:
    oid = cert.signature_algorithm_oid.dotted_string
    if oid == "1.2.840.113549.1.1.10":
        algorithm = cert.signature_hash_algorithm
        return _PSS_BY_HASH.get(algorithm.name if algorithm else "", 0)
    return _SIGNATURE_ALGORITHMS.get(oid, 0)


def _url(text: str) -> dict[str, Any]:
    """Go's url.URL struct, as encoding/json writes it."""
    parts = urlsplit(text)
    opaque = ""
    path = parts.path
    if parts.scheme and not text[len(parts.scheme) + 1 :].startswith("/"):
        opaque, path = text[len(parts.scheme) + 1 :].split("#", 1)[0].split("?", 1)[0], ""
    unescaped = unquote(path)
    return {
        "Scheme": parts.scheme,
        "Opaque": opaque,
        "User": {} if "@" in parts.netloc else None,
        "Host": parts.netloc.rsplit("@", 1)[-1],
        "Path": unescaped,
        "RawPath": path if path != unescaped and "%" in path else "",
        "OmitHost": False,
        "ForceQuery": text.endswith("?") and not parts.query,
        "RawQuery": parts.query,
        "Fragment": unquote(parts.fragment),
        "RawFragment": "",
    }


def _ip_net(network: Any) -> dict[str, Any]:
    return {"IP": str(network.network_address), "Mask": b64(network.netmask.packed)}


def certificate_value(cert: x509.Certificate) -> dict[str, Any]:
    """One certificate as OPA shows it."""
    algorithm, public_key = _public_key(cert)
    value: dict[str, Any] = {
        "Raw": b64(cert.public_bytes(serialization.Encoding.DER)),
        "RawTBSCertificate": b64(cert.tbs_certificate_bytes),
        "RawSubjectPublicKeyInfo": b64(
            cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        ),
        "RawSubject": b64(cert.subject.public_bytes()),
        "RawIssuer": b64(cert.issuer.public_bytes()),
        "Signature": b64(cert.signature),
        "SignatureAlgorithm": _signature_algorithm(cert),
        "PublicKeyAlgorithm": algorithm,
        "PublicKey": public_key,
        "Version": cert.version.value + 1,
        "SerialNumber": big_number(cert.serial_number),
        "Issuer": _name(cert.issuer),
        "Subject": _name(cert.subject),
        "NotBefore": _time(cert.not_valid_before_utc),
        "NotAfter": _time(cert.not_valid_after_utc),
        "KeyUsage": 0,
        "Extensions": None,  # Go's nil slice: a certificate without extensions
        "ExtraExtensions": None,
        "UnhandledCriticalExtensions": None,
        "ExtKeyUsage": None,
        "UnknownExtKeyUsage": None,
        "BasicConstraintsValid": False,
        "IsCA": False,
        "MaxPathLen": 0,
        "MaxPathLenZero": False,
        "SubjectKeyId": None,
        "AuthorityKeyId": None,
        "OCSPServer": None,
        "IssuingCertificateURL": None,
        "DNSNames": None,
        "EmailAddresses": None,
        "IPAddresses": None,
        "URIs": None,
        "PermittedDNSDomainsCritical": False,
        "PermittedDNSDomains": None,
        "ExcludedDNSDomains": None,
        "PermittedIPRanges": None,
        "ExcludedIPRanges": None,
        "PermittedEmailAddresses": None,
        "ExcludedEmailAddresses": None,
        "PermittedURIDomains": None,
        "ExcludedURIDomains": None,
        "CRLDistributionPoints": None,
        "PolicyIdentifiers": None,
        "Policies": None,
        "InhibitAnyPolicy": 0,
        "InhibitAnyPolicyZero": False,
        "InhibitPolicyMapping": 0,
        "InhibitPolicyMappingZero": False,
        "RequireExplicitPolicy": 0,
        "RequireExplicitPolicyZero": False,
        "PolicyMappings": None,
        "URIStrings": None,
    }
    for extension in cert.extensions:
        _add_extension(value, extension)
    return value


def _time(moment: datetime.datetime) -> str:
    text = moment.astimezone(datetime.UTC).isoformat()
    return text.replace("+00:00", "Z")


def _append(value: dict[str, Any], field: str, items: list[Any]) -> None:
    if items:
        value[field] = [*(value[field] or []), *items]


def _add_extension(value: dict[str, Any], extension: x509.Extension[Any]) -> None:
    oid = extension.oid.dotted_string
    ext = extension.value
    raw = ext.value if isinstance(ext, x509.UnrecognizedExtension) else ext.public_bytes()
    _append(value, "Extensions", [{"Id": _oid(oid), "Critical": extension.critical, "Value": b64(raw)}])
    if extension.critical and oid not in _HANDLED:
        value["UnhandledCriticalExtensions"] = [*(value["UnhandledCriticalExtensions"] or []), _oid(oid)]
    if oid == ExtensionOID.KEY_USAGE.dotted_string:
        bits = sum(1 << i for i, flag in enumerate(_KEY_USAGE_BITS) if getattr(ext, flag))
        if ext.key_agreement:
            bits |= (ext.encipher_only << 7) | (ext.decipher_only << 8)
        value["KeyUsage"] = bits
    elif oid == ExtensionOID.BASIC_CONSTRAINTS.dotted_string:
        value["BasicConstraintsValid"] = True
        value["IsCA"] = ext.ca
        value["MaxPathLen"] = -1 if ext.path_length is None else ext.path_length
        value["MaxPathLenZero"] = ext.path_length == 0
    elif oid == ExtensionOID.SUBJECT_ALTERNATIVE_NAME.dotted_string:
        _append(value, "DNSNames", ext.get_values_for_type(x509.DNSName))
        _append(value, "EmailAddresses", ext.get_values_for_type(x509.RFC822Name))
        _append(value, "IPAddresses", [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)])
        uris = ext.get_values_for_type(x509.UniformResourceIdentifier)
        _append(value, "URIs", [_url(u) for u in uris])
        _append(value, "URIStrings", uris)
    elif oid == ExtensionOID.EXTENDED_KEY_USAGE.dotted_string:
        usages = [u.dotted_string for u in ext]
        _append(value, "ExtKeyUsage", [_EXT_KEY_USAGES[u] for u in usages if u in _EXT_KEY_USAGES])
        _append(value, "UnknownExtKeyUsage", [_oid(u) for u in usages if u not in _EXT_KEY_USAGES])
    elif oid == ExtensionOID.SUBJECT_KEY_IDENTIFIER.dotted_string:
        value["SubjectKeyId"] = b64(ext.digest)
    elif oid == ExtensionOID.AUTHORITY_KEY_IDENTIFIER.dotted_string:
        value["AuthorityKeyId"] = b64(ext.key_identifier)
    elif oid == ExtensionOID.AUTHORITY_INFORMATION_ACCESS.dotted_string:
        for description in ext:
            if isinstance(description.access_location, x509.UniformResourceIdentifier):
                ocsp = description.access_method.dotted_string.endswith(".1")
                _append(value, "OCSPServer" if ocsp else "IssuingCertificateURL", [description.access_location.value])
    elif oid == ExtensionOID.CRL_DISTRIBUTION_POINTS.dotted_string:
        for point in ext:
            uris = [n.value for n in point.full_name or [] if isinstance(n, x509.UniformResourceIdentifier)]
            _append(value, "CRLDistributionPoints", uris)
    elif oid == ExtensionOID.CERTIFICATE_POLICIES.dotted_string:
        _append(value, "PolicyIdentifiers", [_oid(p.policy_identifier.dotted_string) for p in ext])
        _append(value, "Policies", [p.policy_identifier.dotted_string for p in ext])
    elif oid == ExtensionOID.NAME_CONSTRAINTS.dotted_string:
        value["PermittedDNSDomainsCritical"] = extension.critical
        for field, subtrees in (("Permitted", ext.permitted_subtrees), ("Excluded", ext.excluded_subtrees)):
            for general in subtrees or []:
                if isinstance(general, x509.DNSName):
                    _append(value, f"{field}DNSDomains", [general.value])
                elif isinstance(general, x509.IPAddress):
                    _append(value, f"{field}IPRanges", [_ip_net(general.value)])
                elif isinstance(general, x509.RFC822Name):
                    _append(value, f"{field}EmailAddresses", [general.value])
                elif isinstance(general, x509.UniformResourceIdentifier):
                    _append(value, f"{field}URIDomains", [general.value])


@builtin("crypto.x509.parse_certificates")
def parse_certificates(text: Any) -> list[dict[str, Any]]:
    name = "crypto.x509.parse_certificates"
    return [certificate_value(c) for c in load_certificates(name, string_operand(name, text, 1))]


@builtin("crypto.x509.parse_and_verify_certificates")
def parse_and_verify_certificates(text: Any) -> list[Any]:
    """[true, chain] when certs[0] (the root) signs down to the last (the leaf); else [false, []]."""
    name = "crypto.x509.parse_and_verify_certificates"
    try:
        certificates = load_certificates(name, string_operand(name, text, 1))
    except BuiltinError:
        if not isinstance(text, str):
            raise
        return [False, []]
    chain = _verified_chain(certificates) if len(certificates) >= 2 else None
    return [True, [certificate_value(c) for c in chain]] if chain else [False, []]


def _verified_chain(certificates: list[x509.Certificate]) -> list[x509.Certificate] | None:
    """Go's leaf.Verify with certs[0] as the only root, the middle ones as
    intermediates, and its default options: valid now, CA intermediates within
    their path length, and an extended key usage allowing server auth."""
    root, intermediates, leaf = certificates[0], certificates[1:-1], certificates[-1]
    now = datetime.datetime.now(datetime.UTC)
    chain = [leaf]
    current = leaf
    while True:
        if not _valid_at(current, now):
            return None
        if current.issuer == root.subject and _signed_by(current, root):
            chain.append(root)
            break
        parents = [c for c in intermediates if c not in chain and c.subject == current.issuer]
        parents = [c for c in parents if _signed_by(current, c)]
        if not parents or not _is_ca(parents[0], len(chain) - 1):
            return None
        current = parents[0]
        chain.append(current)
    if not _valid_at(root, now):
        return None
    return chain if all(_allows_server_auth(c) for c in chain[:-1]) else None


def _valid_at(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def _is_ca(cert: x509.Certificate, below: int) -> bool:
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False
    return constraints.ca and (constraints.path_length is None or below <= constraints.path_length)


def _allows_server_auth(cert: x509.Certificate) -> bool:
    try:
        usages = {u.dotted_string for u in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value}
    except x509.ExtensionNotFound:
        return True
    return bool(usages & {"2.5.29.37.0", "1.3.6.1.5.5.7.3.1"})


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
