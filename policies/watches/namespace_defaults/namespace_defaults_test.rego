package watches.namespace_defaults_test

import data.watches.namespace_defaults

namespace(labels) := {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": labels}}

on := {"regokite.dev/defaults": "true"}

kinds(objs) := {o.kind | some o in objs}

test_a_labelled_namespace_gets_a_quota_and_limits if {
	objs := namespace_defaults.apply with input as {"event": "ADDED", "object": namespace(on), "params": {}}
	kinds(objs) == {"ResourceQuota", "LimitRange"}
	every o in objs {
		o.metadata.namespace == "shop"
		o.metadata.name == "regokite-defaults"
	}
}

test_quota_comes_from_params if {
	objs := namespace_defaults.apply with input as {
		"event": "RESYNC",
		"object": namespace(on),
		"params": {"quota": {"pods": "5"}},
	}
	some o in objs
	o.kind == "ResourceQuota"
	o.spec.hard == {"pods": "5"}
}

test_unlabelled_namespaces_get_nothing if {
	count(namespace_defaults.apply) == 0 with input as {"event": "ADDED", "object": namespace({}), "params": {}}
}

test_a_terminating_namespace_gets_nothing if {
	terminating := json.patch(namespace(on), [{"op": "add", "path": "/status", "value": {"phase": "Terminating"}}])
	count(namespace_defaults.apply) == 0 with input as {"event": "MODIFIED", "object": terminating, "params": {}}
}

test_leaving_the_watch_deletes_the_defaults if {
	refs := namespace_defaults.delete with input as {"event": "DELETED", "object": namespace(on), "params": {}}
	refs == {
		{"apiVersion": "v1", "kind": "ResourceQuota", "name": "regokite-defaults", "namespace": "shop"},
		{"apiVersion": "v1", "kind": "LimitRange", "name": "regokite-defaults", "namespace": "shop"},
	}
	count(namespace_defaults.apply) == 0 with input as {"event": "DELETED", "object": namespace(on), "params": {}}
}
