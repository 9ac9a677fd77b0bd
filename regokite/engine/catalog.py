"""Which builtins each engine has: regorus's own, regokite's extensions, and
OPA 1.20's, so a policy calling anything else can be refused at load time.

OPA's list is its 1.20 builtins by name (its capabilities, less the infix
operators and `internal.*`, which are syntax that both parsers handle).
"""

from __future__ import annotations

import functools
import json

import regorus

from regokite.engine.extensions import ExtensionOptions, provided

_OPA_NAMES = """
    abs all any array.concat array.flatten array.reverse array.slice base64.decode base64.encode base64.is_valid
    base64url.decode base64url.encode base64url.encode_no_pad bits.and bits.lsh bits.negate bits.or bits.rsh
    bits.xor cast_array cast_boolean cast_null cast_object cast_set cast_string ceil concat contains count
    crypto.hmac.equal crypto.hmac.md5 crypto.hmac.sha1 crypto.hmac.sha256 crypto.hmac.sha512 crypto.md5
    crypto.parse_private_keys crypto.sha1 crypto.sha256 crypto.x509.parse_and_verify_certificates
    crypto.x509.parse_and_verify_certificates_with_options crypto.x509.parse_certificate_request
    crypto.x509.parse_certificates crypto.x509.parse_keypair crypto.x509.parse_rsa_private_key endswith floor
    format_int glob.match glob.quote_meta graph.reachable graph.reachable_paths graphql.is_valid graphql.parse
    graphql.parse_and_verify graphql.parse_query graphql.parse_schema graphql.schema_is_valid hex.decode hex.encode
    http.send indexof indexof_n intersection io.jwt.decode io.jwt.decode_verify io.jwt.encode_sign
    io.jwt.encode_sign_raw io.jwt.verify_eddsa io.jwt.verify_es256 io.jwt.verify_es384 io.jwt.verify_es512
    io.jwt.verify_hs256 io.jwt.verify_hs384 io.jwt.verify_hs512 io.jwt.verify_ps256 io.jwt.verify_ps384
    io.jwt.verify_ps512 io.jwt.verify_rs256 io.jwt.verify_rs384 io.jwt.verify_rs512 is_array is_boolean is_null
    is_number is_object is_set is_string json.filter json.is_valid json.marshal json.marshal_with_options
    json.match_schema json.patch json.remove json.unmarshal json.verify_schema lower max min net.cidr_contains
    net.cidr_contains_matches net.cidr_expand net.cidr_intersects net.cidr_is_valid net.cidr_merge net.cidr_overlap
    net.lookup_ip_addr numbers.range numbers.range_step object.filter object.get object.keys object.remove
    object.subset object.union object.union_n opa.runtime print product providers.aws.sign_req rand.intn re_match
    regex.find_all_string_submatch_n regex.find_n regex.globs_match regex.is_valid regex.match regex.replace
    regex.split regex.template_match rego.metadata.chain rego.metadata.rule rego.parse_module replace round
    semver.compare semver.is_valid set_diff sort split sprintf startswith strings.any_prefix_match
    strings.any_suffix_match strings.count strings.render_template strings.replace_n strings.reverse strings.split_n
    substring sum time.add_date time.clock time.date time.diff time.format time.now_ns time.parse_duration_ns
    time.parse_ns time.parse_rfc3339_ns time.weekday to_number trace trim trim_left trim_prefix trim_right
    trim_space trim_suffix type_name union units.parse units.parse_bytes upper urlquery.decode
    urlquery.decode_object urlquery.encode urlquery.encode_object uuid.parse uuid.rfc4122 walk yaml.is_valid
    yaml.marshal yaml.unmarshal
"""
OPA_BUILTINS: frozenset[str] = frozenset(_OPA_NAMES.split())

# Builtins regorus lists but does not evaluate as OPA does: without the
# network feature `http.send` is always undefined, which would turn a policy
# that depends on a lookup into one that allows everything.
SILENTLY_UNDEFINED = frozenset({"http.send"})

# Calls regorus evaluates that are not in opa.runtime()'s list.
_UNLISTED = frozenset({"print"})


@functools.cache
def regorus_builtins() -> frozenset[str]:
    """The builtins this regorus build evaluates, as it reports them."""
    engine = regorus.Engine()
    engine.add_policy("capabilities.rego", "package capabilities\nruntime := opa.runtime()\n")
    runtime = json.loads(engine.eval_rule_as_json("data.capabilities.runtime"))
    listed = {name for name in runtime["builtins"] if not name.startswith("__")}
    return frozenset((listed | _UNLISTED) - SILENTLY_UNDEFINED)


# Builtins whose calls the rewrite replaces by their values, known at load (engine.rewrite.metadata)
REWRITTEN = frozenset({"rego.metadata.chain", "rego.metadata.rule"})


def embedded_builtins(options: ExtensionOptions) -> frozenset[str]:
    """Every builtin the embedded engine evaluates with these options."""
    return regorus_builtins() | provided(options) | REWRITTEN


def refused(options: ExtensionOptions) -> frozenset[str]:
    """OPA builtins the embedded engine cannot evaluate (the sidecar OPA has them all)."""
    return OPA_BUILTINS - embedded_builtins(options)


def extension_only(options: ExtensionOptions) -> frozenset[str]:
    """The builtins regokite adds that regorus does not know by name (a `with` cannot replace them there)."""
    return frozenset(n for n in provided(options) if not n.startswith("__")) - regorus_builtins()
