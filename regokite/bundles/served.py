"""What a server serves from bundles: `--bundle PATH` files and directories, and the bundles of
`--config-file` (and `--bundle URL`) the bundle plugin keeps active in `store`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from regokite.bundle import Bundle
from regokite.bundles.archive import LoadedBundle, combine, read_bundle_path
from regokite.bundles.config import OpaConfig, Signing, load_config
from regokite.bundles.plugin import ARCHIVES, read_status, read_store


@dataclass(frozen=True)
class ServedBundles:
    config: OpaConfig = field(default_factory=OpaConfig)
    paths: tuple[str, ...] = ()  # local bundles: read at each reload, verified when signed
    store: str | None = None  # where the plugin activates the downloaded ones (set when serving starts)
    v0_compatible: bool = False

    @classmethod
    def given(cls, bundles: list[str], config_file: str | None, *, v0_compatible: bool = False) -> ServedBundles:
        """From `--bundle PATH_OR_URL` (repeatable) and `--config-file`."""
        config = load_config(config_file) if config_file else OpaConfig()
        urls = [b for b in bundles if b.startswith(("http://", "https://"))]
        paths = tuple(b for b in bundles if b not in urls)
        return cls(config.with_urls(urls), paths, v0_compatible=v0_compatible)

    @property
    def downloaded(self) -> bool:
        return bool(self.config.bundles)

    def __bool__(self) -> bool:
        return bool(self.paths or self.config.bundles)

    def watched(self) -> list[str]:
        """What a reload looks at for changes."""
        return [*self.paths, *([str(Path(self.store) / ARCHIVES)] if self.store else [])]

    def load(self) -> list[LoadedBundle]:
        local = [
            read_bundle_path(
                path,
                path,
                signing=Signing() if self.config.keys else None,
                keys=self.config.keys,
                v0_compatible=self.v0_compatible,
            )
            for path in self.paths
        ]
        if not self.store:
            return local
        return [*local, *read_store(Path(self.store), list(self.config.bundles), v0_compatible=self.v0_compatible)]

    def served(self, base: Bundle | None) -> Bundle:
        """The policy directories' bundle (`base`) with these bundles: their roots may not overlap."""
        return combine(self.load(), base) if self else (base or Bundle(()))

    def status(self) -> dict[str, Any] | None:
        """The bundle plugin's last status document (OPA's status API shape)."""
        return read_status(Path(self.store)) if self.store else None
