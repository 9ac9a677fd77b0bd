"""Gatekeeper's four mutators read from their documents and checked as Gatekeeper checks them.

`Assign`, `AssignMetadata`, `ModifySet` (`mutations.gatekeeper.sh` v1,
v1beta1, v1alpha1) and `AssignImage` (v1alpha1). A mutator Gatekeeper would
refuse to ingest (a bad location, a pathTest that is not a prefix of the
location, an `applyTo` without group, version and kind, a value of the wrong
shape for a keyed list, an image part that is not a docker reference part)
is refused here with the same reason, naming the file and the mutator.
`assignIf`, removed from Gatekeeper in v3.7 (its #1548: it allowed
mutations that never converge), is refused rather than silently ignored.
An Assign or AssignMetadata `externalData` (provider, dataSource,
failurePolicy, default) is checked as Gatekeeper's ExternalData.Validate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from regokite.errors import PolicyLoadError, RegokiteError
from regokite.gatekeeper.match import parse_constraint_match
from regokite.gatekeeper.mutation.location import Entry, Field, LocationError, Node, parse_location
from regokite.gatekeeper.resources import MUTATION_GROUP as GROUP

KINDS = ("Assign", "AssignImage", "AssignMetadata", "ModifySet")
SOURCES = ("All", "Generated", "Original")
OPERATIONS = ("CREATE", "UPDATE", "*")
_DOMAIN = re.compile(r"(^\w[\w\-_]*\.[\w\-_\.]*[\w](:\d+)?$)|(^localhost(:\d+)?$)", re.ASCII)
_PATH = re.compile(r"^[a-z0-9]+(?:(?:(?:[._/]|__|[-]*)[a-z0-9]+)+)?", re.ASCII)
_TAG = re.compile(
    r"(^:[\w][\w.-]{0,127}$)|(^@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9A-Fa-f]{32,}$)", re.ASCII
)


class MutatorError(PolicyLoadError):
    """A mutator Gatekeeper would not ingest."""


@dataclass(frozen=True)
class Mutator:
    kind: str
    name: str
    file: str
    location: tuple[Node, ...]
    tests: dict[int, str]  # depth in location -> MustExist | MustNotExist
    match: dict[str, Any]
    apply_to: tuple[dict[str, Any], ...]  # none for AssignMetadata
    value: Any = None  # Assign/AssignMetadata value; ModifySet fromList
    from_metadata: str | None = None  # "namespace" | "name"
    operation: str = "merge"  # ModifySet
    image: tuple[str, str, str] = ("", "", "")  # AssignImage domain, path, tag
    namespace: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    # Assign/AssignMetadata externalData: provider, dataSource, failurePolicy, default (Gatekeeper's defaults)
    external: dict[str, str] | None = field(default=None, compare=False)

    @property
    def id(self) -> str:
        """Gatekeeper's ID as it prints it: GroupKind, then namespace/name."""
        return f"{self.kind}.{GROUP} {self.namespace}/{self.name}"

    @property
    def order(self) -> tuple[str, str, str, str]:
        """Gatekeeper's order: by group, kind, namespace, name."""
        return (GROUP, self.kind, self.namespace, self.name)


def is_mutator(doc: Any) -> bool:
    api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
    return isinstance(api_version, str) and api_version.partition("/")[0] == GROUP


def parse_mutator(doc: dict[str, Any], file: str) -> Mutator:
    """A Mutator from its document; MutatorError names the file, the mutator and the field."""
    kind, meta = doc.get("kind"), doc.get("metadata") or {}
    name = meta.get("name") if isinstance(meta, dict) else None
    where = f"{file}: {kind} {name or '?'}"
    if kind not in KINDS:
        raise MutatorError(f"{where}: kind must be one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not name:
        raise MutatorError(f"{where}: needs metadata.name")
    if len(name) > 63:
        raise MutatorError(f"{where}: the name must be at most 63 characters, as Gatekeeper requires")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise MutatorError(f"{where}: needs spec")
    try:
        return _parse(kind, name, spec, file, where, doc)
    except (RegokiteError, LocationError) as exc:
        if isinstance(exc, MutatorError):
            raise
        raise MutatorError(f"{where}: {exc}") from None


def _parse(kind: str, name: str, spec: dict[str, Any], file: str, where: str, doc: dict[str, Any]) -> Mutator:
    match = spec.get("match") or {}
    parse_constraint_match(match, f"{where}: spec.match")
    if match.get("source", "All") not in SOURCES:
        raise MutatorError(f"{where}: spec.match.source must be one of {', '.join(SOURCES)}")
    params = spec.get("parameters") or {}
    if not isinstance(params, dict):
        raise MutatorError(f"{where}: spec.parameters must be an object")
    if "assignIf" in params:
        raise MutatorError(
            f"{where}: parameters.assignIf was removed from Gatekeeper in v3.7 (it allowed mutations that never"
            " converge); use pathTests"
        )
    location = _location(spec.get("location"), where, "spec.location")
    namespace = (doc.get("metadata") or {}).get("namespace") or ""
    common = {"kind": kind, "name": name, "file": file, "location": location, "match": match, "namespace": namespace}
    if kind == "AssignMetadata":
        if "applyTo" in spec:
            raise MutatorError(f"{where}: AssignMetadata has no applyTo")
        return _assign_metadata(common, params, where, doc)
    apply_to = _apply_to(spec.get("applyTo"), where)
    if location[0] == Field("metadata"):
        raise MutatorError(f"{where}: {kind} can't change metadata (use AssignMetadata)")
    tests = _path_tests(params.get("pathTests"), location, where)
    common |= {"tests": tests, "apply_to": apply_to, "raw": doc}
    if kind == "Assign":
        return _assign(common, params, where)
    if isinstance(location[-1], Entry):
        raise MutatorError(f"{where}: the final node of a {kind} location cannot be a keyed list")
    if kind == "ModifySet":
        operation = params.get("operation", "merge")
        if operation not in ("merge", "prune"):
            raise MutatorError(f"{where}: parameters.operation must be merge or prune, got {operation!r}")
        from_list = (params.get("values") or {}).get("fromList", [])
        if not isinstance(from_list, list):
            raise MutatorError(f"{where}: parameters.values.fromList must be a list")
        return Mutator(**common, value=from_list, operation=operation)
    _check_key_unchanged(location, where)
    image = tuple(params.get(k) or "" for k in ("assignDomain", "assignPath", "assignTag"))
    _check_image(*image, where=where)  # type: ignore[misc]
    return Mutator(**common, image=image)  # type: ignore[arg-type]


def _location(text: Any, where: str, what: str) -> tuple[Node, ...]:
    if not isinstance(text, str):
        raise MutatorError(f"{where}: {what} must be a string")
    try:
        return parse_location(text)
    except LocationError as exc:
        raise MutatorError(f"{where}: invalid {what} {text!r}: {exc}") from None


def _apply_to(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or not value:
        raise MutatorError(f"{where}: applyTo required")
    out = []
    for i, entry in enumerate(value):
        parts = {k: (entry or {}).get(k) or [] for k in ("groups", "versions", "kinds", "operations")}
        if not all(isinstance(v, list) and all(isinstance(s, str) for s in v) for v in parts.values()):
            raise MutatorError(f"{where}: applyTo[{i}] fields must be lists of strings")
        if not (parts["groups"] and parts["versions"] and parts["kinds"]):
            raise MutatorError(f"{where}: invalid applyTo[{i}], all of group, version and kind must be specified")
        ops = parts["operations"]
        if any(op not in OPERATIONS for op in ops) or len(set(ops)) != len(ops) or ("*" in ops and len(ops) > 1):
            raise MutatorError(f"{where}: applyTo[{i}].operations must be CREATE, UPDATE, or * alone")
        out.append(parts)
    return tuple(out)


def _path_tests(value: Any, location: tuple[Node, ...], where: str) -> dict[int, str]:
    """Gatekeeper's tester: each subPath a prefix of the location, one condition per depth."""
    tests: dict[int, str] = {}
    lowest_must_not, highest_must = 2**31, 0
    for i, test in enumerate(value or []):
        if not isinstance(test, dict) or test.get("condition") not in ("MustExist", "MustNotExist"):
            raise MutatorError(f"{where}: pathTests[{i}].condition must be MustExist or MustNotExist")
        sub = _location(test.get("subPath"), where, f"pathTests[{i}].subPath")
        if location[: len(sub)] != sub:
            raise MutatorError(f"{where}: pathTests[{i}]: subpath is not a prefix of location")
        depth, condition = len(sub) - 1, test["condition"]
        if tests.get(depth, condition) != condition:
            raise MutatorError(f"{where}: pathTests[{i}]: path is marked both MustExist and MustNotExist")
        tests[depth] = condition
        if condition == "MustNotExist":
            lowest_must_not = min(lowest_must_not, i)
        elif i > highest_must:
            highest_must = i
    if highest_must > lowest_must_not:
        raise MutatorError(f"{where}: pathTests: a path is marked MustExist but its parent MustNotExist")
    return tests


def _assign_field(params: dict[str, Any], where: str) -> tuple[Any, str | None, dict[str, str] | None]:
    """(value, fromMetadata field, externalData) of `parameters.assign`, checked as Gatekeeper's AssignField."""
    assign = params.get("assign")
    if not isinstance(assign, dict):
        raise MutatorError(f"{where}: parameters.assign must be an object")
    given = [k for k in ("value", "fromMetadata", "externalData") if assign.get(k) is not None]
    if not given:
        raise MutatorError(f"{where}: assign must set one of `externalData`, `value` or `fromMetadata`")
    if len(given) > 1:
        raise MutatorError(f"{where}: assign must only set one of `externalData`, `value` or `fromMetadata`")
    if given[0] == "externalData":
        return None, None, _external_data(assign["externalData"], where)
    if given[0] == "fromMetadata":
        field_name = (assign["fromMetadata"] or {}).get("field")
        if field_name not in ("namespace", "name"):
            raise MutatorError(f"{where}: fromMetadata.field must be namespace or name, got {field_name!r}")
        return None, field_name, None
    return assign["value"], None, None


EXTERNAL_SOURCES = ("ValueAtLocation", "Username")
FAILURE_POLICIES = ("Fail", "Ignore", "UseDefault")


def _external_data(spec: Any, where: str) -> dict[str, str]:
    """An externalData with its CRD's defaults (dataSource ValueAtLocation, failurePolicy Fail)."""
    if not isinstance(spec, dict):
        raise MutatorError(f"{where}: assign.externalData must be an object")
    found = {
        "provider": spec.get("provider") or "",
        "dataSource": spec.get("dataSource") or "ValueAtLocation",
        "failurePolicy": spec.get("failurePolicy") or "Fail",
        "default": spec.get("default") or "",
    }
    if not all(isinstance(v, str) for v in found.values()):
        raise MutatorError(
            f"{where}: assign.externalData's provider, dataSource, failurePolicy and default are strings"
        )
    if not found["provider"]:
        raise MutatorError(f"{where}: assign.externalData.provider is required")
    if found["dataSource"] not in EXTERNAL_SOURCES:
        raise MutatorError(f"{where}: assign.externalData.dataSource must be one of {', '.join(EXTERNAL_SOURCES)}")
    if found["failurePolicy"] not in FAILURE_POLICIES:
        raise MutatorError(f"{where}: assign.externalData.failurePolicy must be one of {', '.join(FAILURE_POLICIES)}")
    if found["failurePolicy"] == "UseDefault" and not found["default"]:
        raise MutatorError(f"{where}: `default` must not be empty when `failurePolicy` is set to `UseDefault`")
    return found


def _assign(common: dict[str, Any], params: dict[str, Any], where: str) -> Mutator:
    location = common["location"]
    _check_key_unchanged(location, where)
    value, from_metadata, external = _assign_field(params, where)
    last = location[-1]
    if isinstance(last, Entry):
        if from_metadata is not None:
            raise MutatorError(f"{where}: cannot assign a metadata field to a list")
        if external is not None:
            raise MutatorError(f"{where}: cannot assign external data response to a list")
        if last.glob:
            raise MutatorError(f"{where}: can't append to a globbed list")
        if not isinstance(value, dict):
            raise MutatorError(f"{where}: invalid value {value!r}, only objects can be added to keyed lists")
        if value.get(last.key) != last.value or type(value.get(last.key)) is not type(last.value):
            raise MutatorError(
                f"{where}: adding object to list with different key {last.key}: list key {last.value!r},"
                f" object key {value.get(last.key)!r}"
            )
    return Mutator(**common, value=value, from_metadata=from_metadata, external=external)


def _assign_metadata(common: dict[str, Any], params: dict[str, Any], where: str, doc: dict[str, Any]) -> Mutator:
    location = common["location"]
    valid = (
        len(location) == 3
        and all(isinstance(n, Field) for n in location)
        and location[:2] in ((Field("metadata"), Field("labels")), (Field("metadata"), Field("annotations")))
    )
    if not valid:
        raise MutatorError(f"{where}: invalid location for assignmetadata: only metadata.labels.<key> or"
                           " metadata.annotations.<key>")  # fmt: skip
    value, from_metadata, external = _assign_field(params, where)
    if external is not None and external["dataSource"] != "Username":
        raise MutatorError(f"{where}: only username data source is supported for assignmetadata {common['name']}")
    if from_metadata is None and external is None and not isinstance(value, str):
        raise MutatorError(f"{where}: spec.parameters.assign.value field must be a string for AssignMetadata")
    # Gatekeeper never overwrites an existing label or annotation: the location MustNotExist
    tests = {2: "MustNotExist"}
    return Mutator(
        **common, tests=tests, apply_to=(), value=value, from_metadata=from_metadata, raw=doc, external=external
    )


def _check_key_unchanged(location: tuple[Node, ...], where: str) -> None:
    if len(location) >= 2 and isinstance(location[-2], Entry):
        last = location[-1]
        if isinstance(last, Field) and last.name == location[-2].key:
            raise MutatorError(f"{where}: invalid path format: changing the item key is not allowed")


def split_domain(name: str) -> tuple[str, str]:
    """A docker reference's domain: the part before the first `/` when it has `.` or `:` or is localhost."""
    head, slash, rest = name.partition("/")
    if not slash or (not any(c in head for c in ".:") and head != "localhost"):
        return "", name
    return head, rest


def split_tag(remainder: str) -> tuple[str, str]:
    cut = min((i for i in (remainder.find(":"), remainder.find("@")) if i >= 0), default=-1)
    return (remainder, "") if cut < 0 else (remainder[:cut], remainder[cut:])


def _check_image(domain: str, path: str, tag: str, *, where: str) -> None:
    """Gatekeeper's validateImageParts."""
    if not (domain or path or tag):
        raise MutatorError(f"{where}: at least one of [assignDomain, assignPath, assignTag] must be set")
    if domain and (not _DOMAIN.search(domain) or split_domain(domain + "/") != (domain, "")):
        raise MutatorError(f"{where}: assignDomain {domain!r} must be a fully-qualified domain name or localhost")
    found = _PATH.match(path)
    if path and (found is None or found.group(0) != path):
        raise MutatorError(f"{where}: assignPath {path!r} must be a valid docker image path")
    if tag and (not _TAG.search(tag) or split_tag(tag) != ("", tag)):
        raise MutatorError(
            f"{where}: assignTag {tag!r} must be a valid docker image tag or digest starting with ':' or '@'"
        )
    if not domain and split_domain(path)[0]:
        raise MutatorError(
            f"{where}: assignDomain must be set if the first part of assignPath {path!r} can be interpreted"
            " as part of a domain"
        )
