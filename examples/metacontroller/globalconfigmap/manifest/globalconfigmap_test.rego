package examples.metacontroller.globalconfigmap_test

import data.examples.metacontroller.globalconfigmap

parent := {
	"apiVersion": "examples.metacontroller.io/v1alpha1",
	"kind": "GlobalConfigMap",
	"metadata": {"name": "globalsettings"},
	"spec": {"sourceName": "globalsettings", "sourceNamespace": "global"},
}

source := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": "globalsettings", "namespace": "global"},
	"data": {"some": "value"},
}

namespaces := {name: {"metadata": {"name": name}} | some name in ["global", "first", "second"]}

sync(configmaps) := {
	"controller": {},
	"parent": parent,
	"children": {"ConfigMap.v1": {}},
	"related": {"ConfigMap.v1": configmaps, "Namespace.v1": namespaces},
	"finalizing": false,
}

test_customize_relates_the_source_and_every_namespace if {
	globalconfigmap.relatedResources == [
		{"apiVersion": "v1", "resource": "configmaps", "namespace": "global", "names": ["globalsettings"]},
		{"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}},
	] with input as {"controller": {}, "parent": parent}
}

test_a_copy_in_every_other_namespace if {
	children := globalconfigmap.children with input as sync({"global/globalsettings": source})
	{[c.metadata.namespace, c.metadata.name, c.data] | some c in children} == {
		["first", "globalsettings", {"some": "value"}],
		["second", "globalsettings", {"some": "value"}],
	}
}

test_no_copies_once_the_source_is_gone if {
	globalconfigmap.children == [] with input as sync({})
}

test_status_is_fine if {
	globalconfigmap.status == {"working": "fine"} with input as sync({})
}
