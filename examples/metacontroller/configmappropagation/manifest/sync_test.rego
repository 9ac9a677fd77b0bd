package examples.metacontroller.configmappropagation_test

import data.examples.metacontroller.configmappropagation as hook

parent := {
	"apiVersion": "examples.metacontroller.io/v1alpha1",
	"kind": "ConfigMapPropagation",
	"metadata": {"name": "settings-propagation"},
	"spec": {"sourceName": "settings", "sourceNamespace": "original", "targetNamespaces": ["one", "two"]},
}

settings := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "original"}, "data": {"some": "value"}}

test_customize_relates_the_source if {
	hook.relatedResources == [{"apiVersion": "v1", "resource": "configmaps", "namespace": "original", "names": ["settings"]}] with input as {"parent": parent}
}

test_a_copy_per_target_namespace_and_the_counts if {
	request := {"parent": parent, "children": {"ConfigMap.v1": {"one/settings": {}}}, "related": {"ConfigMap.v1": {"original/settings": settings}}}
	hook.children == [
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "one"}, "data": {"some": "value"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "two"}, "data": {"some": "value"}},
	] with input as request
	hook.status == {"expected_copies": 2, "actual_copies": 1} with input as request
}

test_no_copies_once_the_source_is_gone if {
	request := {"parent": parent, "children": {"ConfigMap.v1": {}}, "related": {"ConfigMap.v1": {}}}
	hook.children == [] with input as request
	hook.status == {"expected_copies": 2, "actual_copies": 0} with input as request
}
