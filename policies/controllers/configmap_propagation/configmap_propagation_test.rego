package controllers.configmap_propagation_test

import data.controllers.configmap_propagation

parent := {
	"apiVersion": "examples.regokite.dev/v1alpha1",
	"kind": "ConfigMapPropagation",
	"metadata": {"name": "settings"},
	"spec": {"sourceName": "settings", "sourceNamespace": "global", "targetNamespaces": ["a", "b", "global"]},
}

source := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": "settings", "namespace": "global"},
	"data": {"color": "blue"},
}

sync(related, children) := {
	"controller": {},
	"parent": parent,
	"children": {"ConfigMap.v1": children},
	"related": related,
	"finalizing": false,
}

test_customize_relates_exactly_the_source if {
	configmap_propagation.relatedResources == [{
		"apiVersion": "v1",
		"resource": "configmaps",
		"namespace": "global",
		"names": ["settings"],
	}] with input as {"controller": {}, "parent": parent}
}

test_one_copy_per_target_namespace_but_not_the_source_one if {
	copies := configmap_propagation.children with input as sync({"ConfigMap.v1": {"global/settings": source}}, {})
	{c.metadata.namespace | some c in copies} == {"a", "b"}
	every c in copies {
		c.data == {"color": "blue"}
		c.metadata.name == "settings"
	}
}

test_no_copies_without_the_source if {
	configmap_propagation.children == [] with input as sync({"ConfigMap.v1": {}}, {})
	configmap_propagation.status.source_found == false with input as sync({}, {})
}

test_status_counts_expected_and_observed_copies if {
	configmap_propagation.status == {
		"expected_copies": 2,
		"actual_copies": 1,
		"source_found": true,
	} with input as sync({"ConfigMap.v1": {"global/settings": source}}, {"a/settings": {}})
}
