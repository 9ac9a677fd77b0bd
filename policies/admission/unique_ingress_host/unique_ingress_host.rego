# No two Ingresses may serve the same host, as in OPA's Kubernetes admission
# tutorial: the Ingresses already in the cluster are read from replicated
# data in kube-mgmt's layout, data.kubernetes.ingresses[namespace][name].
#
# `replicate` declares what the policy reads: regokite replicates it (and
# `regokite manifests` grants get/list/watch on it) without flags.
package admission.unique_ingress_host

match := {"rules": [{
	"operations": ["CREATE", "UPDATE"],
	"apiGroups": ["networking.k8s.io"],
	"apiVersions": ["*"],
	"resources": ["ingresses"],
}]}

replicate := {"namespaced": ["networking.k8s.io/v1/ingresses"]}

obj := input.request.object

# the request's own object, which may already be replicated (on UPDATE)
self := [input.request.namespace, object.get(obj, ["metadata", "name"], "")]

deny contains msg if {
	some rule in obj.spec.rules
	host := rule.host
	some namespace, name
	other := data.kubernetes.ingresses[namespace][name]
	[namespace, name] != self
	some other_rule in other.spec.rules
	other_rule.host == host
	msg := sprintf("host %q is already served by Ingress %s/%s: choose another host", [host, namespace, name])
}
