# Metacontroller's clusteredparent example (sync.py) as a Rego sync hook.
#
# A DecoratorController on ClusterRoles annotated
# default-service-account-binding: each gets a RoleBinding in namespace
# default, named after it, binding it to the default ServiceAccount.
package examples.metacontroller.clusteredparent

rolebinding(name) := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "RoleBinding",
	"metadata": {"name": name, "namespace": "default"},
	"subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
	"roleRef": {"kind": "ClusterRole", "name": name, "apiGroup": "rbac.authorization.k8s.io"},
}

attachments := [rolebinding(input.object.metadata.name)]
