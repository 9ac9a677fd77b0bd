# Metacontroller's crd-roles example (sync.py) as a Rego sync hook, served at
# its definition's URL http://crd-role-controller.metacontroller/sync-crd-role
# (the ConfigMap crd-role-controller, key sync-crd-role.rego).
#
# A DecoratorController on CustomResourceDefinitions annotated
# enable-default-roles: each gets a ClusterRole <crd name>-reader, with no
# rules (as upstream's: its rule is commented out there).
package examples.metacontroller.crd_roles

cluster_role(crd) := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "ClusterRole",
	"metadata": {"name": concat("", [crd.metadata.name, "-reader"])},
	"rules": [],
}

attachments := [cluster_role(input.object)]
