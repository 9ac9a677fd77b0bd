"""Metacontroller-compatible controllers whose hooks are Rego: pure decisions, no I/O.

* `definitions` — CompositeController YAML -> typed, validated definitions.
* `hooks` — the hook contract: request building, output translation, hook targets.
* `composite` — claiming, desired children, the diff against observed children.

The code that watches and writes lives in `regokite.kube`.
"""
