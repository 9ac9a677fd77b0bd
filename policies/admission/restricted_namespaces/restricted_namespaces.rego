# Workloads in namespaces labelled regokite.io/tier=restricted must keep their
# root filesystem read-only and run as non-root. The namespace's labels are
# read from replicated data, data.kubernetes.namespaces[name] (kube-mgmt's
# layout for a cluster-scoped resource): the AdmissionReview does not carry them.
package admission.restricted_namespaces

import data.lib.kubernetes

match := {"rules": [
	{
		"operations": ["CREATE", "UPDATE"],
		"apiGroups": [""],
		"apiVersions": ["v1"],
		"resources": ["pods", "podtemplates", "replicationcontrollers"],
	},
	{
		"operations": ["CREATE", "UPDATE"],
		"apiGroups": ["apps"],
		"apiVersions": ["v1"],
		"resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
	},
	{
		"operations": ["CREATE", "UPDATE"],
		"apiGroups": ["batch"],
		"apiVersions": ["v1"],
		"resources": ["jobs", "cronjobs"],
	},
]}

replicate := {"cluster": ["v1/namespaces"]}

obj := input.request.object

restricted if {
	namespace := data.kubernetes.namespaces[input.request.namespace]
	namespace.metadata.labels["regokite.io/tier"] == "restricted"
}

pod_spec := kubernetes.pod_spec(obj)

deny contains msg if {
	restricted
	some ref in kubernetes.container_refs(obj)
	not object.get(ref.container, ["securityContext", "readOnlyRootFilesystem"], false)
	msg := sprintf(
		"container %q (%s) in restricted namespace %s must set securityContext.readOnlyRootFilesystem: true",
		[ref.name, ref.path, input.request.namespace],
	)
}

deny contains msg if {
	restricted
	some ref in kubernetes.container_refs(obj)
	not runs_as_non_root(ref.container)
	msg := sprintf(
		"container %q (%s) in restricted namespace %s must run as non-root: set securityContext.runAsNonRoot: true",
		[ref.name, ref.path, input.request.namespace],
	)
}

runs_as_non_root(c) if object.get(c, ["securityContext", "runAsNonRoot"], false) == true

runs_as_non_root(c) if {
	not object.get(c, ["securityContext", "runAsNonRoot"], null) == false
	object.get(pod_spec, ["securityContext", "runAsNonRoot"], false) == true
}
