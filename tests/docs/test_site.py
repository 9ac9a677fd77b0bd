"""The documentation site: it builds with `mkdocs build --strict`, its CLI reference is generated
from the parsers, the README's links resolve, and a headless Chromium renders Getting started."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from regokite.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _commands(
    parser: argparse.ArgumentParser, prefix: str = "regokite"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def test_the_cli_reference_is_every_command_and_option_of_the_parsers(site: Path) -> None:
    page = (site / "reference/cli/index.html").read_text()
    commands = list(_commands(build_parser()))
    assert len(commands) > 15 and "regokite manifests admission" in dict(commands)
    for name, parser in commands:
        anchor = f'id="{name.replace(" ", "-")}"'  # the command's heading
        assert anchor in page, name
        section = re.split(r"<h[234]", page.split(anchor, 1)[1], maxsplit=1)[0]  # up to the next command
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help" and action.help != argparse.SUPPRESS:
                    assert f"<code>{flag}</code>" in section, f"{name} {flag}"


def test_every_page_is_in_the_navigation(site: Path) -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages == set(re.findall(r": ([\w/.-]+\.md)$", nav, re.M))


def test_the_readme_links_to_pages_that_exist() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text())
    assert len(links) > 15
    assert [link for link in links if not (ROOT / link).is_file()] == []


def _png(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG (no imaging library needed)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_a_headless_chromium_renders_getting_started(site: Path, tmp_path: Path) -> None:
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium (scripts/test installs Debian's; apt-get install -y chromium)")
    shots = Path(os.environ.get("REGOKITE_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "getting-started.png"
    shot.unlink(missing_ok=True)
    page = site / "getting-started/index.html"
    done = subprocess.run(
        [
            *(browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={shot}"),
            *("--window-size=1280,1000", f"--user-data-dir={tmp_path / 'profile'}", page.as_uri()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file(), done.stderr
    width, height, rows = _png(shot)
    assert (width, height) == (1280, 1000)
    # a rendered page, not a blank one: many distinct byte values across the scanlines
    assert len(set(rows)) > 64
    assert "Two commands" in page.read_text()
