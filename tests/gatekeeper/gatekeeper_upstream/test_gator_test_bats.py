"""`gator test`'s bats cases (test/gator/test/test.bats), each re-expressed on `regokite check`.

gator test reads templates, constraints and objects from the same inputs and
reviews the objects; `regokite check` takes the policies with `--policies` and
the objects with `-f`, so every gator `--filename` X is given as both, and
gator's stdin as `-f -` (the file it came from also as `--policies`). gator's
`-o yaml`/`-o json` become `--format yaml`/`--format json`. Exit codes: gator's
1 for a deny violation is regokite's 1; gator's 1 for bad input is regokite's
documented 2 (any non-zero is taken for it). A message the case wants must be
in the output, as the bats helpers check it. Every @test of the bats file is
here or in listed.yaml, else its test fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.gatekeeper.gatekeeper_upstream.harness import bats_names, gatekeeper, judge, regokite

ROOT = Path(__file__).resolve().parents[3]
BATS = "test/gator/test/test.bats"
PROBES = "Container <tomcat> in your <Pod> <test-pod1> has no <readinessProbe>"


@dataclass(frozen=True)
class Case:
    """`regokite check` with `inputs` (each as --policies and -f), `stdin` (a file as --policies and
    fed to `-f -`), `policies` (--policies only), and what the bats case wants."""

    inputs: tuple[str, ...] = ()
    stdin: str | None = None
    form: str | None = None
    exit: str = "0"  # "0", "1" (violations), "error" (any non-zero but 1 allowed), "nonzero"
    output: tuple[str, ...] = ()
    extra: tuple[str, ...] = field(default=())


def f(relative: str) -> str:
    return f"fixtures/{relative}"


CASES: dict[str, Case | Callable[[Path], str | None]] = {
    "manifest with no violations piped to stdin returns 0 exit status":
        Case(stdin=f("manifests/with-policies/no-violations.yaml")),
    "manifest with violations redirected to stdin returns 1 exit status":
        Case(stdin=f("manifests/with-policies/with-violations.yaml"), exit="1"),
    "manifest with violations piped to stdin returns 1 exit status":
        Case(stdin=f("manifests/with-policies/with-violations.yaml"), exit="1", output=(PROBES,)),
    "manifest with no violations included as flag returns 0 exit status":
        Case(inputs=(f("manifests/with-policies/no-violations.yaml"),)),
    "manifest with violations included as flag returns 1 exit status":
        Case(inputs=(f("manifests/with-policies/with-violations.yaml"),), exit="1"),
    "manifest with rego v1 template and violations included as flag returns 1 exit status":
        Case(inputs=(f("manifests/with-policies/with-violations-rego-v1.yaml"),), exit="1"),
    "multiple files passed in flags is supported":
        Case(inputs=(f("manifests/no-policies/with-violations.yaml"), f("policies/default")), form="yaml", exit="1",
             output=(PROBES,)),
    "stdin and flag are supported in combination":
        Case(inputs=(f("policies/default"),), stdin=f("manifests/no-policies/with-violations.yaml"), form="yaml",
             exit="1", output=(PROBES,)),
    "correctly returns no violations from objects in a filesystem":
        Case(inputs=(f("policies/default"), f("manifests/no-policies/no-violations.yaml"))),
    "correctly finds violations from objects in a filesystem":
        Case(inputs=(f("policies/default"), f("manifests/no-policies/with-violations.yaml")), exit="1"),
    "disallows invalid template":
        Case(inputs=(f("manifests/invalid-resources/template.yaml"),), exit="error", output=("template.yaml",)),
    "disallows invalid constraint":
        Case(inputs=(f("manifests/invalid-resources/constraint.yaml"),), exit="error", output=("constraint.yaml",)),
    "outputs valid json when flag is specified":
        Case(inputs=(f("manifests/with-policies/with-violations.yaml"),), form="json", exit="1", output=(PROBES,)),
    "outputs valid yaml when flag is specified":
        Case(inputs=(f("manifests/with-policies/with-violations.yaml"),), form="yaml", exit="1", output=(PROBES,)),
    "correctly ingests files of different extensions, skipping bad extensions, and producing correct violations":
        Case(inputs=(f("manifests/different-extensions"),), form="yaml", exit="1", output=(PROBES,)),
    "enforcementAction=deny causes 1 exit status and violations output":
        Case(inputs=(f("policies/default/template_k8srequiredprobes.yaml"),
                     f("policies/enforcement_action/k8srequiredprobes/deny.yaml"),
                     f("manifests/no-policies/with-violations.yaml")), form="yaml", exit="1", output=(PROBES,)),
    "enforcementAction=[anything else] causes 0 exit status and violations output":
        Case(inputs=(f("policies/default/template_k8srequiredprobes.yaml"),
                     f("policies/enforcement_action/k8srequiredprobes/foo.yaml"),
                     f("manifests/no-policies/with-violations.yaml")), form="yaml", output=(PROBES,)),
    "referential data causes violation":
        Case(inputs=(f("policies/default"), f("manifests/referential-data")), form="yaml", exit="1",
             output=("ingress host conflicts with an existing ingress <example-host.example.com>",)),
    "observe open api v3 defaults being applied":
        Case(inputs=(f("manifests/with-policies/with-violations-and-defaults.yaml"),), form="yaml", exit="1",
             output=("aRequiredLabel", "aRequiredMessage")),
}  # fmt: skip


def check(case: Case, base: Path) -> str | None:
    """Why regokite check does not do what the bats case wants of gator test (None: it does)."""
    inputs = [str(base / i) for i in case.inputs]
    policies = [*inputs, *([str(base / case.stdin)] if case.stdin else [])]
    args = ["check", *(a for p in policies for a in ("--policies", p)), *(a for i in inputs for a in ("-f", i))]
    if case.stdin:
        args += ["-f", "-"]
    if case.form:
        args += ["--format", case.form]
    done = regokite(*args, *case.extra, stdin=(base / case.stdin).read_text() if case.stdin else "")
    text = done.stdout + done.stderr
    code_ok = {
        "0": done.returncode == 0,
        "1": done.returncode == 1,
        "error": done.returncode not in (0, 1) or (done.returncode == 1 and "error" in done.stderr),
        "nonzero": done.returncode != 0,
    }[case.exit]
    missing = [want for want in case.output if want not in text]
    if code_ok and not missing:
        return None
    return f"exit {done.returncode} (want {case.exit}), missing {missing}: {text[-1500:]}"


def no_stdin_wait(_: Path) -> str | None:
    """gator test with no input fails at once (regokite check: its arguments are required)."""
    done = regokite("check")
    return None if done.returncode != 0 else "exit 0"


def no_input_data(_: Path) -> str | None:
    done = regokite("check", "--policies", str(ROOT / "policies"))
    return None if done.returncode != 0 and "no input data identified" in done.stderr else done.stderr[-500:]


def disallowed_extension(tmp: Path) -> str | None:
    manifest = tmp / "tmp.XXXXXX"
    manifest.write_text(
        (gatekeeper() / "test/gator/test" / f("manifests/with-policies/with-violations.yaml")).read_text()
    )
    done = regokite("check", "--policies", str(manifest), "-f", str(manifest), "--format", "yaml")
    want = "must be of extensions: [.yaml .yml .json]"
    return None if done.returncode != 0 and want in done.stderr else f"exit {done.returncode}: {done.stderr[-500:]}"


def expansion_with_namespace_selector(_: Path) -> str | None:
    base = gatekeeper() / "test/gator/test"
    missing_ns = check(Case(inputs=(f("manifests/expansion/expansion-w-ns-selector.yaml"),), form="yaml", exit="1",
                            output=("Implied by expand-deployments] unable to match constraints: error matching the "
                                    "requested object: nginx-deployment-pod :failed to run Match criteria: namespace "
                                    "selector for namespace-scoped object but missing Namespace",)), base)  # fmt: skip
    owner = "[Implied by expand-deployments] All pods must have an `owner` label that points to your company username"
    inputs = (f("manifests/expansion/expansion-w-ns-selector.yaml"), f("manifests/expansion/ns.yaml"))
    with_ns = check(Case(inputs=inputs, form="yaml", exit="1", output=(owner,)), base)
    return "; ".join(filter(None, [missing_ns, with_ns])) or None


SPECIAL: dict[str, Callable[[Path], str | None]] = {
    "gator test doesn't wait on stdin input": no_stdin_wait,
    "expects user to input data": no_input_data,
    "reports error if provided file is not a directory and has disallowed extension": disallowed_extension,
    "expansion with namespace selector": expansion_with_namespace_selector,
}


@pytest.mark.parametrize("name", bats_names(BATS))
def test_gator_test_bats_case(name: str, tmp_path: Path) -> None:
    base = gatekeeper() / "test/gator/test"

    def run() -> str | None:
        if name in SPECIAL:
            return SPECIAL[name](tmp_path)
        case = CASES.get(name)
        if case is None:
            return "not re-expressed on regokite's commands"
        return check(case, base) if isinstance(case, Case) else case(tmp_path)

    judge(f"gator-test-bats/{name}", run)
