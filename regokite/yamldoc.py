"""YAML read as OPA and kubectl read it: into JSON values, nothing else.

PyYAML's safe loader turns `2025-01-01` into a `date` and `1: a` into an int
key, neither of which is JSON (regorus refuses them, OPA never sees them):
OPA and Kubernetes convert YAML to JSON first (sigs.k8s.io/yaml), keeping
timestamps as the strings they were written as and map keys as strings.
Every YAML file or value regokite reads goes through here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAMLError = yaml.YAMLError


class _JsonLoader(_Base):  # type: ignore[misc,valid-type]
    """The safe loader without implicit timestamps, with string keys."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        self.flatten_mapping(node)  # `<<` merge keys
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _key(self.construct_object(key_node, deep=True))  # before 1 and true can collide
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def _scalar_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return loader.construct_scalar(node)


_JsonLoader.add_constructor(_TIMESTAMP, _scalar_text)  # an explicit !!timestamp stays its text too
_JsonLoader.add_constructor("tag:yaml.org,2002:binary", _scalar_text)  # base64 text, as JSON carries bytes


def _key(key: Any) -> str:
    """A non-string key as sigs.k8s.io/yaml writes it into JSON."""
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, float) and key.is_integer():
        return str(int(key)) if abs(key) < 1e21 else repr(key)
    if isinstance(key, (int, float, str)):
        return str(key)
    raise yaml.constructor.ConstructorError(None, None, f"a mapping key must be a scalar, found {type(key).__name__}")


def load(text: str) -> Any:
    """One YAML document as a JSON value."""
    return yaml.load(text, Loader=_JsonLoader)


def load_all(text: str) -> Iterator[Any]:
    """Every document of a multi-document stream, as JSON values."""
    return yaml.load_all(text, Loader=_JsonLoader)
