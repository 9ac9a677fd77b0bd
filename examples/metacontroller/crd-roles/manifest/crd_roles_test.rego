package examples.metacontroller.crd_roles_test

import data.examples.metacontroller.crd_roles

crd := {
	"apiVersion": "apiextensions.k8s.io/v1",
	"kind": "CustomResourceDefinition",
	"metadata": {"name": "my-tests.ctl.rlg.io", "annotations": {"enable-default-roles": "yes"}},
	"spec": {"group": "ctl.rlg.io", "names": {"plural": "my-tests"}},
}

sync := {
	"controller": {},
	"object": crd,
	"attachments": {"ClusterRole.rbac.authorization.k8s.io/v1": {}},
	"related": {},
	"finalizing": false,
}

test_a_reader_cluster_role_without_rules if {
	crd_roles.attachments == [{
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind": "ClusterRole",
		"metadata": {"name": "my-tests.ctl.rlg.io-reader"},
		"rules": [],
	}] with input as sync
}
