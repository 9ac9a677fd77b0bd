"""The Rego every generated mutator module imports: Gatekeeper's match, applyTo and setters.

Hand-written once, v1, evaluated identically by regorus and OPA; the
per-mutator modules only hold their constants and the walk down their
location. Results are objects: `{"mutated": bool, "value": ...}` from a step
of a walk, `{"object": ...}` or `{"error": msg}` from a whole mutator.
"""

import json

from regokite.bundle import Module
from regokite.clusterdata.store import replica_root

PACKAGE = "regokite_gatekeeper.mutation.lib"
PLACEHOLDER = "__regokite_external_data__"  # the key of an external data placeholder object

_TEXT = r"""package regokite_gatekeeper.mutation.lib

# --- the object -------------------------------------------------------------

api_version(o) := v if {
	v := o.apiVersion
	is_string(v)
} else := ""

# {"group", "version", "kind"} of an object, as unstructured.GroupVersionKind reads them
gvk(o) := {"group": parts[0], "version": parts[1], "kind": kind(o)} if {
	parts := split(api_version(o), "/")
	count(parts) == 2
} else := {"group": "", "version": api_version(o), "kind": kind(o)} if {
	not contains(api_version(o), "/")
} else := {"group": "", "version": "", "kind": ""}

kind(o) := k if {
	k := o.kind
	is_string(k)
} else := ""

meta(o, key) := v if {
	v := o.metadata[key]
	is_string(v)
} else := ""

labels(o) := l if {
	l := o.metadata.labels
	is_object(l)
} else := {}

name_or_generate_name(o) := meta(o, "name") if meta(o, "name") != ""

else := meta(o, "generateName")

is_namespace(o) if {
	g := gvk(o)
	g.kind == "Namespace"
	g.group == ""
}

# unstructured's SetNamespace: "" removes the field
with_namespace(o, "") := json.remove(o, ["metadata/namespace"])

with_namespace(o, ns) := object.union(o, {"metadata": {"namespace": ns}}) if ns != ""

describe(o) := sprintf("%s %s %s %s", [gvk(o).group, gvk(o).kind, meta(o, "namespace"), name_or_generate_name(o)])

go_type(x) := "map[string]interface {}" if is_object(x)

else := "[]interface {}" if is_array(x)

else := "string" if is_string(x)

else := "bool" if is_boolean(x)

else := "<nil>" if is_null(x)

else := "int64" if x == round(x)

else := "float64"

# --- match (spec.match, normalised when generated) ---------------------------

match_error(m, o, ctx) := msg if {
	m.namespaceSelector != null
	not is_namespace(o)
	ns := namespace_name(o, ctx)
	ns != ""
	not namespace_object(ns)
	msg := missing_namespace
}

missing_namespace := "namespace selector for namespace-scoped object but missing Namespace"

namespace_object(name) := __NAMESPACES__[name]

# the namespace the criteria speak of: a Namespace's own name, else the request's
namespace_name(o, ctx) := meta(o, "name") if is_namespace(o)

else := ctx.namespace if ctx.namespace != ""

else := meta(o, "namespace")

has_namespace(o, _) if is_namespace(o)

has_namespace(_, ctx) if ctx.namespace != ""

# gator's expander knows a Namespace (an empty one) for a workload that names none
has_namespace(_, ctx) if object.get(ctx, "namespace_known", false) == true

has_namespace(o, _) if meta(o, "namespace") != ""

kinds_ok(m, _) if count(m.kinds) == 0

kinds_ok(m, o) if {
	g := gvk(o)
	some kk in m.kinds
	any_or(kk.kinds, g.kind)
	any_or(kk.apiGroups, g.group)
}

any_or(list, _) if count(list) == 0

any_or(list, _) if "*" in list

any_or(list, x) if x in list

scope_ok(m, _, _) if not m.scope in {"Cluster", "Namespaced"}

scope_ok(m, o, _) if {
	m.scope == "Cluster"
	is_namespace(o)
}

scope_ok(m, o, ctx) if {
	m.scope == "Cluster"
	not has_namespace(o, ctx)
}

scope_ok(m, o, ctx) if {
	m.scope == "Namespaced"
	not is_namespace(o)
	has_namespace(o, ctx)
}

namespaces_ok(m, _, _) if count(m.namespaces) == 0

namespaces_ok(_, o, ctx) if namespace_name(o, ctx) == ""

namespaces_ok(m, o, ctx) if {
	some p in m.namespaces
	glob_matches(p, namespace_name(o, ctx))
}

excluded(m, o, ctx) if {
	ns := namespace_name(o, ctx)
	ns != ""
	some p in m.excludedNamespaces
	glob_matches(p, ns)
}

labels_ok(m, _) if m.labelSelector == null

labels_ok(m, o) if selects(m.labelSelector, labels(o))

namespace_selector_ok(m, _, _) if m.namespaceSelector == null

namespace_selector_ok(m, o, _) if {
	is_namespace(o)
	selects(m.namespaceSelector, labels(o))
}

namespace_selector_ok(_, o, ctx) if {
	not is_namespace(o)
	namespace_name(o, ctx) == ""
}

namespace_selector_ok(m, o, ctx) if {
	not is_namespace(o)
	selects(m.namespaceSelector, labels(namespace_object(namespace_name(o, ctx))))
}

name_ok(m, _) if m.name == ""

name_ok(m, o) if glob_matches(m.name, meta(o, "name"))

name_ok(m, o) if glob_matches_generate_name(m.name, meta(o, "generateName"))

source_ok(m, _) if m.source in {"", "All"}

source_ok(m, ctx) if m.source == ctx.source

# Gatekeeper's wildcard: exact, `prefix*`, `*suffix` or `*infix*`
glob_matches(p, s) := contains(s, trim_suffix(trim_prefix(p, "*"), "*")) if {
	startswith(p, "*")
	endswith(p, "*")
} else := endswith(s, trim_prefix(p, "*")) if {
	startswith(p, "*")
} else := startswith(s, trim_suffix(p, "*")) if {
	endswith(p, "*")
} else := p == s

glob_matches_generate_name(p, s) := contains(s, trim_suffix(trim_prefix(p, "*"), "*")) if {
	startswith(p, "*")
	endswith(p, "*")
} else := startswith(s, trim_suffix(p, "*")) if {
	endswith(p, "*")
} else := false

selects(sel, l) if {
	every k, v in sel.matchLabels {
		l[k] == v
	}
	every e in sel.matchExpressions {
		requirement(e, l)
	}
}

requirement(e, l) if {
	e.operator == "In"
	l[e.key] in e.values
}

requirement(e, l) if {
	e.operator == "NotIn"
	not l[e.key] in e.values
}

requirement(e, l) if {
	e.operator == "Exists"
	e.key in object.keys(l)
}

requirement(e, l) if {
	e.operator == "DoesNotExist"
	not e.key in object.keys(l)
}

# --- steps of a walk down a location -----------------------------------------

mismatch(node_type, cur, location) := {"error": sprintf(
	"mismatch between path entry (type: %s) and received object (type: %s). Path: %s",
	[node_type, go_type(cur), location],
)}

pick(e, r) := r.value if r.mutated

else := e

put_elements(cur, rs) := {"error": errs[0]} if {
	errs := [r.error | some r in rs; r.error]
	count(errs) > 0
} else := {"mutated": true, "value": [pick(cur[i], r) | some i, r in rs]} if {
	some changed in rs
	changed.mutated
} else := {"mutated": false}

append_element(_, r, _) := r if r.error

append_element(cur, r, new) := {"mutated": r.mutated, "value": array.concat(cur, [pick(new, r)])} if not r.error

keyed(e, key, value) if {
	is_object(e)
	e[key] == value
}

# Assign at a keyed list entry: the first element with the key replaced, or the value appended
set_keyed(cur, key, value, v, exists_ok, missing_ok) := cast_error(cur[bad[0]]) if {
	bad := [i | some i, e in cur; not is_object(e); not keyed_before(cur, key, value, i)]
	count(bad) > 0
} else := r if {
	hits := [i | some i, e in cur; keyed(e, key, value)]
	count(hits) > 0
	r := replace_at(cur, hits[0], v, exists_ok)
} else := {"mutated": false} if {
	not missing_ok
} else := {"mutated": true, "value": array.concat(cur, [v])}

cast_error(x) := {"error": sprintf("cast error, unable to cast %s to map[string]interface{}", [go_type(x)])}

keyed_before(cur, key, value, i) if {
	some j, e in cur
	j < i
	keyed(e, key, value)
}

replace_at(cur, i, v, true) := {"mutated": true, "value": array.concat(before, after)} if {
	before := array.concat(array.slice(cur, 0, i), [v])
	after := array.slice(cur, i + 1, count(cur))
}

replace_at(_, _, _, false) := {"mutated": false}

# --- external data (Assign, AssignMetadata) ------------------------------------

# Gatekeeper's ExternalDataPlaceholder: set where the value goes, resolved once the passes are done; a
# field that held a string (or a placeholder) is the key sent to the provider
placeholder_field(cur, key, p) := {"mutated": true, "value": put(cur, key, p)} if {
	not key in object.keys(cur)
} else := {"mutated": true, "value": put(cur, key, with_key(p, cur[key]))} if {
	is_string(cur[key])
} else := {"mutated": true, "value": put(cur, key, with_key(p, cur[key][__PLACEHOLDER__].valueAtLocation))} if {
	is_placeholder(cur[key])
} else := {"error": sprintf(
	"value assigned to external data placeholder is not a string, got %v (%s)",
	[cur[key], go_type(cur[key])],
)}

with_key(p, key) := {__PLACEHOLDER__: object.union(p[__PLACEHOLDER__], {"valueAtLocation": key})}

is_placeholder(x) if {
	is_object(x)
	__PLACEHOLDER__ in object.keys(x)
}

# each placeholder in o that is an object's field, as Gatekeeper resolves them: [path, placeholder]
placeholders(o) := [[path, p[__PLACEHOLDER__]] |
	walk(o, [path, p])
	is_placeholder(p)
	is_string(path[count(path) - 1])
]

# what a placeholder resolves to, {"value"} or {"error"}, from its provider's `answer`
# ({"error"} for the provider as a whole, else {"items": {key: {"value", "error"}}})
external_value(p, answer) := on_failure(p, answer.error) if {
	answer.error
} else := on_failure(p, sprintf("failed to find external data item in response for provider %s", [p.provider])) if {
	not p.valueAtLocation in object.keys(answer.items)
} else := on_failure(p, sprintf("failed to retrieve external data item from provider %s: %s", [p.provider, e])) if {
	e := answer.items[p.valueAtLocation].error
	e != ""
} else := on_failure(p, sprintf(
	"failed to convert external data item value from provider %s to string, got type %s",
	[p.provider, json_go_type(answer.items[p.valueAtLocation].value)],
)) if {
	not is_string(answer.items[p.valueAtLocation].value)
} else := {"value": answer.items[p.valueAtLocation].value}

on_failure(p, msg) := {"error": msg} if {
	p.failurePolicy == "Fail"
} else := {"value": p.valueAtLocation} if {
	p.failurePolicy == "Ignore"
} else := {"value": p.default}

# a value decoded from JSON as Go's %T names it
json_go_type(x) := "float64" if is_number(x)

else := go_type(x)

# k8s.io's aggregate error: its messages once each; one as it is, several bracketed
aggregate(msgs) := unique[0] if {
	unique := [m | some i, m in msgs; not m in array.slice(msgs, 0, i)]
	count(unique) == 1
} else := concat("", ["[", concat(", ", [m | some i, m in msgs; not m in array.slice(msgs, 0, i)]), "]"])

# --- setters at the last field of a location ----------------------------------

put(cur, key, v) := object.union(object.remove(cur, [key]), {key: v})

# ModifySet merge: values appended when missing, the list created when absent
merge_field(cur, key, values) := {"mutated": true, "value": put(cur, key, values)} if {
	not key in object.keys(cur)
} else := {"error": not_a_set(cur[key])} if {
	not is_array(cur[key])
} else := {"mutated": true, "value": put(cur, key, array.concat(cur[key], added))} if {
	added := [x | some i, x in values; not x in cur[key]; not x in array.slice(values, 0, i)]
}

# ModifySet prune: values removed; an absent list stays absent (its parents are still created)
prune_field(cur, key, values) := {"mutated": true, "value": cur} if {
	not key in object.keys(cur)
} else := {"error": not_a_set(cur[key])} if {
	not is_array(cur[key])
} else := {"mutated": true, "value": put(cur, key, [x | some x in cur[key]; not x in values])}

not_a_set(v) := sprintf("%v is not a list of values, cannot treat it as a set", [v])

# AssignImage: domain, path and tag replaced where set
image_field(cur, key, parts) := {"error": sprintf(
	"expected value at AssignImage location to be a string, got %v of type %s",
	[cur[key], go_type(cur[key])],
)} if {
	key in object.keys(cur)
	not is_string(cur[key])
} else := {"mutated": true, "value": put(cur, key, image(object.get(cur, key, ""), parts))}

image(ref, parts) := concat("", [domain_prefix(either(parts[0], d)), either(parts[1], p), either(parts[2], t)]) if {
	[d, rest] := split_domain(ref)
	[p, t] := split_tag(rest)
}

either(new, old) := new if new != ""

else := old

domain_prefix("") := ""

domain_prefix(d) := concat("", [d, "/"]) if d != ""

# a docker reference's domain: before the first "/", when it has "." or ":" or is localhost
split_domain(ref) := [substring(ref, 0, i), substring(ref, i + 1, -1)] if {
	i := indexof(ref, "/")
	i >= 0
	domain_like(substring(ref, 0, i))
} else := ["", ref]

domain_like(h) if contains(h, ".")

domain_like(h) if contains(h, ":")

domain_like(h) if h == "localhost"

split_tag(rest) := [substring(rest, 0, i), substring(rest, i, -1)] if {
	cuts := [c | some sep in [":", "@"]; c := indexof(rest, sep); c >= 0]
	count(cuts) > 0
	i := min(cuts)
} else := [rest, ""]
"""


def library_text(replicate_path: str = "kubernetes") -> str:
    """The library reading a namespaceSelector's Namespaces where they are replicated (`--replicate-path`)."""
    ref = "data" + "".join(f".{p}" if p.isidentifier() else f"[{json.dumps(p)}]" for p in replica_root(replicate_path))
    return _TEXT.replace("__PLACEHOLDER__", f'"{PLACEHOLDER}"').replace("__NAMESPACES__", f"{ref}.namespaces")


LIBRARY = library_text()


def library_module(replicate_path: str = "kubernetes") -> Module:
    return Module(f"<{PACKAGE}>.rego", library_text(replicate_path))
