package examples.metacontroller.configmap_list_v2_test

import data.examples.metacontroller.configmap_list_v2

parent(spec) := {
	"apiVersion": "examples.metacontroller.io/v1alpha1",
	"kind": "ConfigMapList",
	"metadata": {"name": "my-config-list", "namespace": "target-ns"},
	"spec": spec,
}

test_customize_relates_the_labelled_configmaps_of_the_source_namespace if {
	configmap_list_v2.relatedResources == [{
		"apiVersion": "v1",
		"resource": "configmaps",
		"labelSelector": {"matchLabels": {"app": "my-app"}},
		"namespace": "source-ns",
	}] with input as {"controller": {}, "parent": parent({"sourceNamespace": "source-ns", "sourceLabels": {"app": "my-app"}})}
}

test_customize_without_source_namespace_relates_every_namespace if {
	configmap_list_v2.relatedResources == [{
		"apiVersion": "v1",
		"resource": "configmaps",
		"labelSelector": {"matchLabels": {"app": "my-app"}},
	}] with input as {"controller": {}, "parent": parent({"sourceLabels": {"app": "my-app"}})}
}

sync(related) := {
	"controller": {},
	"parent": parent({"sourceLabels": {"app": "my-app"}}),
	"children": {"ConfigMap.v1": {}},
	"related": related,
	"finalizing": false,
}

test_lists_the_related_configmaps_sorted if {
	related := {"ConfigMap.v1": {"source-ns/cm-2": {}, "other-ns/cm-3": {}, "source-ns/cm-1": {}}}
	configmap_list_v2.children == [{
		"apiVersion": "v1",
		"kind": "ConfigMap",
		"metadata": {"name": "my-config-list-list", "namespace": "target-ns"},
		"data": {"configmaps": "other-ns/cm-3\nsource-ns/cm-1\nsource-ns/cm-2"},
	}] with input as sync(related)
	configmap_list_v2.status == {"count": 3} with input as sync(related)
}

test_an_empty_list_without_related_configmaps if {
	configmap_list_v2.children[0].data == {"configmaps": ""} with input as sync({})
	configmap_list_v2.status == {"count": 0} with input as sync({})
}
