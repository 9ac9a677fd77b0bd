"""A tiny kustomize renderer for the subset deploy/ uses, for tests only.

No kustomize or kubectl binary is installable here, so this renders exactly
the features deploy/ relies on, and refuses everything else instead of
guessing: `resources` (YAML files and directories holding a
kustomization.yaml), `components` (kind Component), and `patches` whose body
is a JSON 6902 operation list with a `target` naming group, version, kind and
name. Strategic-merge patches, generators, name prefixes, labels and the rest
of kustomize raise NotImplementedError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import yaml

Obj = dict[str, Any]
SUPPORTED = {"apiVersion", "kind", "resources", "components", "patches"}


def render(directory: Path) -> list[Obj]:
    return _build(Path(directory), "Kustomization")


def _build(directory: Path, expected_kind: str) -> list[Obj]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    if spec.get("kind", "Kustomization") != expected_kind:
        raise ValueError(f"{directory}: expected a {expected_kind}, got {spec.get('kind')}")
    unknown = set(spec) - SUPPORTED
    if unknown:
        raise NotImplementedError(f"{directory}: kustomization fields not supported here: {sorted(unknown)}")
    objects: list[Obj] = []
    for entry in spec.get("resources") or []:
        path = directory / entry
        if path.is_dir():
            objects += _build(path, "Kustomization")
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for entry in spec.get("components") or []:
        # A component sees, and patches, everything accumulated so far.
        objects = _component(directory / entry, objects)
    for patch in spec.get("patches") or []:
        objects = _patch(directory, patch, objects)
    _check_unique(objects, directory)
    return objects


def _component(directory: Path, objects: list[Obj]) -> list[Obj]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text())
    if spec.get("kind") != "Component":
        raise ValueError(f"{directory}: a component must have kind Component")
    unknown = set(spec) - SUPPORTED
    if unknown:
        raise NotImplementedError(f"{directory}: kustomization fields not supported here: {sorted(unknown)}")
    objects = list(objects)
    for entry in spec.get("resources") or []:
        objects += [d for d in yaml.safe_load_all((directory / entry).read_text()) if d is not None]
    for patch in spec.get("patches") or []:
        objects = _patch(directory, patch, objects)
    return objects


def _patch(directory: Path, patch: Obj, objects: list[Obj]) -> list[Obj]:
    body = (
        yaml.safe_load((directory / patch["path"]).read_text()) if "path" in patch else yaml.safe_load(patch["patch"])
    )
    if not isinstance(body, list):
        raise NotImplementedError(f"{directory}: only JSON 6902 patches (a list of operations) are supported")
    target = patch["target"]
    matched = 0
    out = []
    for obj in objects:
        group, _, version = obj["apiVersion"].rpartition("/")
        if (
            target.get("kind") == obj["kind"]
            and target.get("name") == obj["metadata"]["name"]
            and target.get("group", "") == group
            and target.get("version", version) == version
        ):
            matched += 1
            obj = jsonpatch.apply_patch(obj, body)
        out.append(obj)
    if matched != 1:
        raise ValueError(f"{directory}: patch {patch.get('path')} matched {matched} objects, expected 1")
    return out


def _check_unique(objects: list[Obj], directory: Path) -> None:
    seen = set()
    for o in objects:
        key = (o["apiVersion"].rpartition("/")[0], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        if key in seen:
            raise ValueError(f"{directory}: {key} is defined twice")
        seen.add(key)
