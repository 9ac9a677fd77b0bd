"""Template Rego made into bundle modules, each template in a namespace of its own.

Gatekeeper rewrites every template's package to a path under its kind and
its libs' `data.lib...` references to that template's own copy, so two
templates may declare the same package or the same lib without colliding.
regokite does the same: the template's package becomes
`regokite_gatekeeper.templates.<Kind>`, a lib `lib.x` becomes
`regokite_gatekeeper.libs.<Kind>.lib.x`, and `data.lib` references move
with them. Like Gatekeeper, a template may read only `data.lib` and
`data.inventory`. Each template is compiled on its own first, so one that
does not compile is reported (template file and line) and the others load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from regokite.bundle import Bundle, Module
from regokite.engine import Capability, EngineSettings, open_engine
from regokite.errors import Location, PolicyLoadError, RegokiteError
from regokite.gatekeeper.constraint_schema import ConstraintSchema
from regokite.gatekeeper.resources import RegoSource, Template
from regokite.outline import outline, packages

ROOT = "regokite_gatekeeper"
ALLOWED_DATA = ("lib", "inventory")
_PACKAGE = re.compile(r"^([ \t]*package[ \t]+)([^\s#]+)", re.MULTILINE)
_DATA_REF = re.compile(r"\bdata\b(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[\s*\"([^\"]*)\"\s*\]|(?=[^.\[\w]|$))")


def template_package(kind: str) -> str:
    return f"{ROOT}.templates.{kind}"


def violation_ref(kind: str) -> str:
    return f"data.{template_package(kind)}.violation"


@dataclass(frozen=True)
class Compiled:
    """A template that compiled: its rewritten modules, ready for a bundle, and its constraints' schema."""

    template: Template
    modules: tuple[Module, ...]
    constraint_schema: ConstraintSchema


def template_modules(template: Template) -> tuple[Module, ...]:
    """The template's Rego with packages and `data.lib` references rewritten; errors name file:line."""
    if template.rego is None:
        raise PolicyLoadError(
            f"{template.file}: ConstraintTemplate {template.name} has no Rego code "
            f"(engines: {', '.join(template.engines) or 'none'}); regokite evaluates Rego only"
        )
    libs_root = f"{ROOT}.libs.{template.kind}"
    modules = [_module(template, template.rego, template_package(template.kind), libs_root)]
    for lib in template.libs:
        declared = _declared_package(lib)
        if declared != "lib" and not declared.startswith("lib."):
            raise _error(lib, 1, 1, f"a lib's package must start with lib, got {declared!r}")
        modules.append(_module(template, lib, f"{libs_root}.{declared}", libs_root))
    return tuple(modules)


def _declared_package(source: RegoSource) -> str:
    found = _PACKAGE.search(source.text)
    if found is None:
        raise _error(source, 1, 1, "no package declaration")
    return found.group(2)


def _module(template: Template, source: RegoSource, package: str, libs_root: str) -> Module:
    _declared_package(source)
    text = _PACKAGE.sub(lambda m: m.group(1) + package, source.text, count=1)
    text = _rewrite_data_refs(text, source, libs_root)
    origin = Location(source.file, source.line, source.indent + 1)
    return Module(module_path(template.kind, source), text, v0=not template.v1, origin=origin)


def module_path(kind: str, source: RegoSource) -> str:
    """A template module's identity: its kind and role, never the file holding it (a file may hold
    many templates; the engine's rewrites and errors key by identity), unique in a bundle as kinds are."""
    return f"<{template_package(kind)}:{source.role}>.rego"


def _rewrite_data_refs(text: str, source: RegoSource, libs_root: str) -> str:
    """`data.lib` -> the template's libs; any other data root but inventory is refused."""
    out: list[str] = []
    for kind, chunk, offset in _code_chunks(text):
        if kind != "code":
            out.append(chunk)
            continue
        pieces: list[str] = []
        last = 0
        for found in _DATA_REF.finditer(chunk):
            name = found.group(1) or found.group(2)
            if name not in ALLOWED_DATA:
                line, col = _line_col(text, offset + found.start())
                what = f"data.{name}" if name is not None else "data"
                raise _error(source, line, col, f"{what}: a template may read only data.lib and data.inventory")
            if name == "lib":
                pieces += [chunk[last : found.start()], f"data.{libs_root}.lib"]
                last = found.end()
        pieces.append(chunk[last:])
        out.append("".join(pieces))
    return "".join(out)


def _code_chunks(text: str) -> Iterable[tuple[str, str, int]]:
    """Split Rego text into code, string and comment runs (offsets kept)."""
    i, start, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c in '"`#':
            if start < i:
                yield "code", text[start:i], start
            j = i + 1
            if c == "#":
                while j < n and text[j] != "\n":
                    j += 1
            elif c == "`":
                while j < n and text[j] != "`":
                    j += 1
                j += 1
            else:
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            yield "other", text[i:j], i
            i = start = j
        else:
            i += 1
    if start < n:
        yield "code", text[start:], start


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _error(source: RegoSource, line: int, col: int, message: str) -> PolicyLoadError:
    """An error at `line`:`col` of a template's Rego, placed in the template's file."""
    lines = source.text.splitlines()
    shown = " " * source.indent + lines[line - 1] if 0 < line <= len(lines) else None
    where = Location(source.file, source.line + line - 1, col + source.indent)
    return PolicyLoadError(f"{message} (in {source.role}, line {line})", where, shown)


def compile_template(template: Template, engine: EngineSettings | None = None) -> Compiled:
    """Compile one template on its own, checked by the embedded engine with `engine`'s extensions; a
    PolicyLoadError locates the problem in the template file. For an `engine` without external_data
    (a sidecar OPA lacks it), a call of it is refused. A parameters schema its constraint CRD could
    not be made with is refused first, as Gatekeeper refuses it."""
    engine = engine or EngineSettings()
    try:
        schema = ConstraintSchema.of(template)
    except RegokiteError as exc:
        raise PolicyLoadError(f"{template.file}: ConstraintTemplate {template.name}: {exc}") from None
    if Capability.EXTERNAL_DATA not in engine.capabilities:
        refuse_external_data(template)
    modules = template_modules(template)
    try:
        checked = open_engine(Bundle(modules), engine.checking())
    except PolicyLoadError as exc:
        raise relocate(exc, template) from None
    checked.close()
    rules = packages(outline(modules)).get(template_package(template.kind), set())
    if "violation" not in rules:
        raise PolicyLoadError(f"{template.file}: ConstraintTemplate {template.name}: its Rego has no violation rule")
    return Compiled(template, modules, schema)


_EXTERNAL_DATA = re.compile(r"(?<![\w.])external_data\s*\(")


def refuse_external_data(template: Template) -> None:
    """external_data is a builtin of the embedded engine only (a sidecar OPA answers `undefined function`)."""
    for source in (template.rego, *template.libs):
        if source is None:
            continue
        for kind, chunk, offset in _code_chunks(source.text):
            found = _EXTERNAL_DATA.search(chunk) if kind == "code" else None
            if found is not None:
                line, col = _line_col(source.text, offset + found.start())
                raise _error(
                    source,
                    line,
                    col,
                    "external_data (Gatekeeper's external data) is evaluated by the embedded engine only: "
                    "serve this template without --engine opa",
                )


def relocate(exc: PolicyLoadError, template: Template) -> PolicyLoadError:
    """An engine error inside a template's module, moved to the line of the template file."""
    sources = {module_path(template.kind, s): s for s in (template.rego, *template.libs) if s is not None}
    loc = exc.location
    source = sources.get(loc.file) if loc else None
    if loc is None or source is None:
        return PolicyLoadError(f"{template.file}: ConstraintTemplate {template.name}: {exc.message}")
    return _error(source, loc.line, loc.col, exc.message)


def compile_all(
    templates: Sequence[Template], engine: EngineSettings | None = None
) -> tuple[dict[str, Compiled], dict[str, PolicyLoadError]]:
    """Each template compiled on its own: (kind -> compiled, kind -> why not)."""
    good: dict[str, Compiled] = {}
    bad: dict[str, PolicyLoadError] = {}
    for template in templates:
        if template.kind in good or template.kind in bad:
            bad[template.kind] = PolicyLoadError(
                f"{template.file}: a second ConstraintTemplate of kind {template.kind}"
            )
            good.pop(template.kind, None)
            continue
        try:
            good[template.kind] = compile_template(template, engine)
        except PolicyLoadError as exc:
            bad[template.kind] = exc
    return good, bad
