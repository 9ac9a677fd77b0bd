package examples.metacontroller.clusteredparent_test

import data.examples.metacontroller.clusteredparent

clusterrole := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "ClusterRole",
	"metadata": {"name": "my-clusterrole", "annotations": {"default-service-account-binding": "default"}},
}

sync(attachments) := {
	"controller": {},
	"object": clusterrole,
	"attachments": {"RoleBinding.rbac.authorization.k8s.io/v1": attachments},
	"related": {},
	"finalizing": false,
}

test_one_rolebinding_in_default_named_after_the_clusterrole if {
	clusteredparent.attachments == [{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind": "RoleBinding",
		"metadata": {"name": "my-clusterrole", "namespace": "default"},
		"subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
		"roleRef": {"kind": "ClusterRole", "name": "my-clusterrole", "apiGroup": "rbac.authorization.k8s.io"},
	}] with input as sync({})
}

test_the_same_whatever_is_observed if {
	desired := clusteredparent.attachments with input as sync({})
	clusteredparent.attachments == desired with input as sync({"default/my-clusterrole": {}})
}
