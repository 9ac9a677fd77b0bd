package controllers.hello_world_test

import data.controllers.hello_world

parent := {
	"apiVersion": "example.com/v1",
	"kind": "HelloWorld",
	"metadata": {"name": "your-name", "namespace": "hello", "uid": "6f1e2f2a-0d67-4c55-9d0f-3f7d1c9a8b01"},
	"spec": {"who": "Your Name"},
}

controller := {
	"apiVersion": "metacontroller.k8s.io/v1alpha1",
	"kind": "CompositeController",
	"metadata": {"name": "hello-controller"},
}

sync(p, pods) := {
	"controller": controller,
	"parent": p,
	"children": {"Pod.v1": pods},
	"related": {},
	"finalizing": false,
}

observed_pod := {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {"name": "your-name", "namespace": "hello"},
	"status": {"phase": "Succeeded"},
}

test_one_pod_named_like_the_parent if {
	hello_world.children == [{
		"apiVersion": "v1",
		"kind": "Pod",
		"metadata": {"name": "your-name", "namespace": "hello"},
		"spec": {
			"restartPolicy": "OnFailure",
			"containers": [{
				"name": "hello",
				"image": "busybox",
				"command": ["echo", "Hello, Your Name!"],
			}],
		},
	}] with input as sync(parent, {})
}

test_who_defaults_to_world if {
	nobody := json.patch(parent, [{"op": "remove", "path": "/spec/who"}])
	hello_world.children[0].spec.containers[0].command == ["echo", "Hello, World!"] with input as sync(nobody, {})
}

test_empty_or_null_who_is_world if {
	empty := json.patch(parent, [{"op": "replace", "path": "/spec/who", "value": ""}])
	hello_world.children[0].spec.containers[0].command == ["echo", "Hello, World!"] with input as sync(empty, {})
	null_who := json.patch(parent, [{"op": "replace", "path": "/spec/who", "value": null}])
	hello_world.children[0].spec.containers[0].command == ["echo", "Hello, World!"] with input as sync(null_who, {})
}

test_parent_without_spec_is_world if {
	bare := object.remove(parent, ["spec"])
	hello_world.children[0].spec.containers[0].command == ["echo", "Hello, World!"] with input as sync(bare, {})
}

test_pod_follows_the_parent_name_and_namespace if {
	other := json.patch(parent, [
		{"op": "replace", "path": "/metadata/name", "value": "greeter"},
		{"op": "replace", "path": "/metadata/namespace", "value": "team-b"},
	])
	hello_world.children[0].metadata == {"name": "greeter", "namespace": "team-b"} with input as sync(other, {})
}

test_pod_without_parent_namespace_has_none if {
	cluster := json.patch(parent, [{"op": "remove", "path": "/metadata/namespace"}])
	hello_world.children[0].metadata == {"name": "your-name"} with input as sync(cluster, {})
}

test_exactly_one_child if {
	count(hello_world.children) == 1 with input as sync(parent, {"your-name": observed_pod})
}

test_status_counts_observed_pods if {
	hello_world.status == {"pods": 0} with input as sync(parent, {})
	hello_world.status == {"pods": 1} with input as sync(parent, {"your-name": observed_pod})
	hello_world.status == {"pods": 2} with input as sync(parent, {"your-name": observed_pod, "stray": observed_pod})
}

test_status_without_children_map if {
	hello_world.status == {"pods": 0} with input as {"parent": parent}
}

test_finalizing_does_not_change_children if {
	finalizing := object.union(sync(parent, {"your-name": observed_pod}), {"finalizing": true})
	desired := hello_world.children with input as sync(parent, {})
	hello_world.children == desired with input as finalizing
}
