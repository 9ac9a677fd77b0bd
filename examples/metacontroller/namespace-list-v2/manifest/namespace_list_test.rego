package examples.metacontroller.namespace_list_v2_test

import data.examples.metacontroller.namespace_list_v2

parent(spec) := {
	"apiVersion": "examples.metacontroller.io/v1alpha1",
	"kind": "NamespaceList",
	"metadata": {"name": "filtered-namespaces", "namespace": "test-ns"},
	"spec": spec,
}

label_selector := {"matchLabels": {"example-controller": "namespace-list"}}

test_customize_relates_the_selected_namespaces if {
	related := namespace_list_v2.relatedResources with input as {"controller": {}, "parent": parent({"labelSelector": label_selector})}
	related == [{"apiVersion": "v1", "resource": "namespaces", "labelSelector": label_selector}]
}

test_customize_without_selector_relates_every_namespace if {
	namespace_list_v2.relatedResources[0].labelSelector == {} with input as {"controller": {}, "parent": parent({})}
}

sync(related) := {
	"controller": {},
	"parent": parent({"labelSelector": label_selector}),
	"children": {"ConfigMap.v1": {}},
	"related": related,
	"finalizing": false,
}

test_lists_the_related_namespaces_sorted if {
	related := {"Namespace.v1": {"test-ns": {}, "b-ns": {}}}
	namespace_list_v2.children == [{
		"apiVersion": "v1",
		"kind": "ConfigMap",
		"metadata": {"name": "filtered-namespaces-list", "namespace": "test-ns"},
		"data": {"namespaces": "b-ns\ntest-ns"},
	}] with input as sync(related)
	namespace_list_v2.status == {"count": 2} with input as sync(related)
}
