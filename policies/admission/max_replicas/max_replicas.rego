# Workloads may not ask for more replicas than the cluster plans for: caps
# spec.replicas of Deployments, StatefulSets, ReplicaSets and
# ReplicationControllers, the scale subresource (kubectl scale) and the
# maxReplicas of HorizontalPodAutoscalers, whose scaling goes through it.
#
# An update that does not add replicas is only warned about, so a workload
# that is already above the cap can still be changed and scaled down.
#
# Parameters (data.params.max_replicas):
#   max         the cap (default 10)
#   namespaces  {namespace: cap} overrides
package admission.max_replicas

import data.lib.kubernetes

match := {
	"rules": [
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["apps"],
			"apiVersions": ["v1"],
			"resources": ["deployments", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": [""],
			"apiVersions": ["v1"],
			"resources": ["replicationcontrollers", "replicationcontrollers/scale"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["autoscaling"],
			"apiVersions": ["*"],
			"resources": ["horizontalpodautoscalers"],
		},
	],
}

enforcement := "deny"

failure_policy := "Fail"

default maximum := 10

maximum := data.params.max_replicas.max

# limit is the cap for the request's namespace.
limit := n if {
	n := data.params.max_replicas.namespaces[input.request.namespace]
} else := maximum

obj := input.request.object

# replicas(o) is what o asks for; Kubernetes defaults spec.replicas to 1.
replicas(o) := object.get(o, ["spec", "replicas"], 1) if o.kind in kubernetes.replicated_kinds

replicas(o) := object.get(o, ["spec", "replicas"], 0) if o.kind == "Scale"

replicas(o) := o.spec.maxReplicas if o.kind == "HorizontalPodAutoscaler"

field(o) := "spec.maxReplicas" if o.kind == "HorizontalPodAutoscaler"

field(o) := "spec.replicas" if o.kind != "HorizontalPodAutoscaler"

# What the request is about, for messages: the scale subresource names the
# resource it scales.
subject := sprintf("%s/scale %q", [input.request.resource.resource, kubernetes.name(obj)]) if obj.kind == "Scale"

subject := sprintf("%s %q", [obj.kind, kubernetes.name(obj)]) if obj.kind != "Scale"

default grows := true

# An update grows the workload only if it asks for more than before.
grows := replicas(obj) > replicas(input.request.oldObject) if input.request.operation == "UPDATE"

too_many if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
	is_number(replicas(obj))
	replicas(obj) > limit
}

where := sprintf("in namespace %s", [input.request.namespace]) if input.request.namespace != ""

where := "cluster-wide" if object.get(input.request, "namespace", "") == ""

deny contains msg if {
	too_many
	grows
	msg := sprintf("%s asks for %d replicas, more than the maximum of %d %s: set %s to %d or less", [subject, replicas(obj), limit, where, field(obj), limit])
}

warn contains msg if {
	too_many
	not grows
	msg := sprintf("%s keeps %d replicas, more than the maximum of %d %s: scale it down to %d or less", [subject, replicas(obj), limit, where, limit])
}
