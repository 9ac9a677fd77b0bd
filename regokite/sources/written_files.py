"""A policy directory that a source keeps equal to what it serves, one file per object.

Both syncers (`regokite configmaps`, `regokite gatekeeper`) write the files a
`regokite admission --policies` server reloads. Each file is replaced
atomically and only when its text changed (a reload costs the server); the
first pass builds the directory (and any missing parent) beside its place
and renames it in, so a server given the directory never sees part of the
first set.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path


def write_files(out: Path, files: Mapping[str, str], *, removed_last: str | None = None) -> None:
    """Make `out` hold exactly `files` (relative path -> text), written in their order. Files no
    longer wanted are removed after the writes, those below `removed_last` after the others (a
    ConstraintTemplate outlives its constraints in every state a reload may see)."""
    if not out.exists():
        top = out
        while not top.parent.exists():
            top = top.parent
        first = Path(tempfile.mkdtemp(dir=top.parent, prefix=f".{top.name}-"))
        for path, text in files.items():
            (first / out.relative_to(top) / path).parent.mkdir(parents=True, exist_ok=True)
            (first / out.relative_to(top) / path).write_text(text, encoding="utf-8")
        for made in (first, *first.rglob("*")):
            made.chmod(0o755 if made.is_dir() else 0o644)  # the server may run as another user
        first.replace(top)
        return
    for path, text in files.items():
        target = out / path
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}-")
        with open(fd, "w", encoding="utf-8") as f:
            f.write(text)
        Path(tmp).chmod(0o644)  # mkstemp makes it private; the server may run as another user
        Path(tmp).replace(target)
    existing = sorted(out.rglob("*"), reverse=True)  # a directory after what it holds
    if removed_last:
        last = out / removed_last
        existing.sort(key=lambda p: p == last or last in p.parents)  # stable: the order above kept
    for path in existing:
        if path.is_file() and str(path.relative_to(out)) not in files:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            shutil.rmtree(path)
