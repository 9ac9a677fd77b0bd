"""OPA's bundles for the admission server: what charts/regokite's `admission.bundles` renders.

OPA's configuration file goes into a Secret (its services carry credentials) mounted read-only and given
as `--config-file`, or an existing Secret holding it under `config.yaml` is mounted instead; `--bundle`
takes URLs or paths in the image. A bundle with `persist: true` keeps its last activated archive below
`persistence_directory`, which the read-only root filesystem cannot hold: a volume (an emptyDir unless
the values say otherwise) is mounted there, and a rendered configuration without that key gets it.
The configuration is read with the server's own parser, so a configuration the server would refuse
is refused here, before anything is applied (docs/switching/opa-bundles.md).
"""

from __future__ import annotations

import base64
import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from regokite.bundles.config import ConfigError, parse_config
from regokite.errors import RegokiteError
from regokite.manifests import workloads as w

Obj = dict[str, Any]
CONFIG_DIR = "/etc/regokite/bundles"
CONFIG_KEY = "config.yaml"
PERSISTENCE_DIR = "/var/lib/regokite/opa"


@dataclass
class BundleOptions:
    """`admission.bundles` of the chart's values, as the generator takes them."""

    config: Obj | None = None  # OPA's configuration file, rendered into the Secret <name>-bundles
    existing_secret: str = ""  # or a Secret of the user's holding it under config.yaml
    urls: list[str] = field(default_factory=list)  # --bundle PATH_OR_URL
    persistence_directory: str = PERSISTENCE_DIR
    persistence_volume: Obj = field(default_factory=dict)  # a volume source; {}: an emptyDir

    def __post_init__(self) -> None:
        if self.config and self.existing_secret:
            raise RegokiteError("admission.bundles: give config or existingSecret, not both")
        if self.config:
            try:
                parse_config(self.config)
            except ConfigError as exc:
                raise RegokiteError(f"admission.bundles.config: {exc}") from None

    @property
    def configured(self) -> bool:
        return bool(self.config or self.existing_secret or self.urls)

    def persisted(self) -> bool:
        """Whether a bundle may persist: one of the config's says so, or the config is not ours to read."""
        if self.existing_secret:
            return True
        return any(spec.get("persist") for spec in ((self.config or {}).get("bundles") or {}).values())

    def rendered_config(self) -> Obj:
        """The configuration as the Secret holds it: persistence_directory defaulted to the mounted volume."""
        config = copy.deepcopy(self.config or {})
        if self.persisted():
            config.setdefault("persistence_directory", self.persistence_directory)
        return config

    def values(self) -> Obj:
        """The chart's `admission.bundles`."""
        return {
            "config": self.config,
            "existingSecret": self.existing_secret,
            "urls": self.urls,
            "persistenceDirectory": self.persistence_directory,
            "persistenceVolume": self.persistence_volume,
        }


def from_values(values: Obj) -> BundleOptions:
    """BundleOptions of a chart values file's `admission.bundles` (absent keys keep the chart's defaults)."""
    given = ((values.get("admission") or {}).get("bundles")) or {}
    return BundleOptions(
        config=given.get("config") or None,
        existing_secret=given.get("existingSecret") or "",
        urls=list(given.get("urls") or []),
        persistence_directory=given.get("persistenceDirectory") or PERSISTENCE_DIR,
        persistence_volume=given.get("persistenceVolume") or {},
    )


def bundle_objects(
    opts: BundleOptions, name: str, ns: str, component: str
) -> tuple[list[Obj], list[Obj], list[Obj], list[str]]:
    """(objects, volumes, volumeMounts, args) serving `opts`' bundles."""
    objects, volumes, mounts, args = [], [], [], []
    if opts.config or opts.existing_secret:
        secret = opts.existing_secret or f"{name}-bundles"
        if opts.config:
            text = yaml.safe_dump(opts.rendered_config(), sort_keys=False)
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": secret, "namespace": ns, "labels": w.labels(component)},
                    "type": "Opaque",
                    "data": {CONFIG_KEY: base64.b64encode(text.encode()).decode()},
                }
            )
        volumes.append({"name": "bundles-config", "secret": {"secretName": secret}})
        mounts.append({"name": "bundles-config", "mountPath": CONFIG_DIR, "readOnly": True})
        args += ["--config-file", f"{CONFIG_DIR}/{CONFIG_KEY}"]
    args += [a for url in opts.urls for a in ("--bundle", url)]
    if (opts.config or opts.existing_secret) and opts.persisted():
        directory = opts.rendered_config().get("persistence_directory", opts.persistence_directory)
        if not str(directory).startswith("/"):
            raise RegokiteError(f"admission.bundles: persistence_directory {directory!r} must be an absolute path")
        volumes.append({"name": "bundles-persistence", **(opts.persistence_volume or {"emptyDir": {}})})
        mounts.append({"name": "bundles-persistence", "mountPath": directory})
    return objects, volumes, mounts, args
