package examples.metacontroller.secretpropagation_test

import data.examples.metacontroller.secretpropagation

parent := {
	"apiVersion": "examples.metacontroller.io/v1alpha1",
	"kind": "SecretPropagation",
	"metadata": {"name": "secret-propagation"},
	"spec": {
		"sourceName": "shareable",
		"sourceNamespace": "omega",
		"targetNamespaceLabelSelector": {"matchLabels": {"propagate": "true"}},
	},
}

source := {
	"apiVersion": "v1",
	"kind": "Secret",
	"metadata": {"name": "shareable", "namespace": "omega"},
	"data": {"some": "dmFsdWUK"},
}

namespaces := {name: {"metadata": {"name": name}} | some name in ["omega", "alpha", "beta"]}

sync(secrets) := {
	"controller": {},
	"parent": parent,
	"children": {"Secret.v1": {}},
	"related": {"Secret.v1": secrets, "Namespace.v1": namespaces},
	"finalizing": false,
}

test_customize_relates_the_source_and_the_selected_namespaces if {
	secretpropagation.relatedResources == [
		{"apiVersion": "v1", "resource": "secrets", "namespace": "omega", "names": ["shareable"]},
		{"apiVersion": "v1", "resource": "namespaces", "labelSelector": {"matchLabels": {"propagate": "true"}}},
	] with input as {"controller": {}, "parent": parent}
}

test_a_copy_in_every_related_namespace_but_the_source_one if {
	children := secretpropagation.children with input as sync({"omega/shareable": source})
	{[c.metadata.namespace, c.metadata.name, c.data] | some c in children} == {
		["alpha", "shareable", {"some": "dmFsdWUK"}],
		["beta", "shareable", {"some": "dmFsdWUK"}],
	}
}

test_no_copies_once_the_source_is_gone if {
	secretpropagation.children == [] with input as sync({})
}

test_status_is_fine if {
	secretpropagation.status == {"working": "fine"} with input as sync({})
}
