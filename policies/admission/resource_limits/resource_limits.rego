# Every container and init container must declare CPU and memory limits, so
# one workload cannot starve its neighbours; limits may be capped. Missing
# requests only warn: Kubernetes then sets each request to its limit.
# Ephemeral containers are skipped: the API does not allow them resources.
#
# Parameters (data.params.resource_limits):
#   resources   resources every container must limit (default cpu, memory)
#   max_limits  {resource: quantity} caps, e.g. {"cpu": "4", "memory": "8Gi"}
package admission.resource_limits

import data.lib.kubernetes

match := {
	"rules": [
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
	],
	"excludedNamespaces": ["kube-system"],
}

enforcement := "deny"

failure_policy := "Fail"

default resources := ["cpu", "memory"]

resources := data.params.resource_limits.resources

default max_limits := {}

max_limits := data.params.resource_limits.max_limits

obj := input.request.object

reviewed if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
}

# Containers that can have resources: all but ephemeral ones.
refs contains ref if {
	reviewed
	some ref in kubernetes.container_refs(obj)
	ref.field != "ephemeralContainers"
}

setting(ref, kind) := object.get(ref.container, ["resources", kind], {})

has_quantity(values, name) if values[name] != null

missing_limits(ref) := sort([r |
	some r in resources
	not has_quantity(setting(ref, "limits"), r)
])

# Resources that are limited but not requested: their request defaults to
# the limit.
missing_requests(ref) := sort([r |
	some r in resources
	has_quantity(setting(ref, "limits"), r)
	not has_quantity(setting(ref, "requests"), r)
])

# quantity(q) is a Kubernetes quantity as a number ("500m" is 0.5); undefined
# for forms units.parse does not read (such as "100n").
quantity(q) := q if is_number(q)

quantity(q) := units.parse(q) if {
	is_string(q)
	regex.match(`^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[KMGTPE]i|[mkMGTPE])?$`, q)
}

deny contains msg if {
	some ref in refs
	names := missing_limits(ref)
	count(names) > 0
	msg := sprintf("container %q (%s) has no %s limit: set %s", [ref.name, ref.path, concat(" or ", names), concat(", ", [sprintf("%s.resources.limits.%s", [ref.path, n]) | some n in names])])
}

deny contains msg if {
	some ref in refs
	some name, maximum in max_limits
	value := setting(ref, "limits")[name]
	quantity(value) > quantity(maximum)
	msg := sprintf("container %q (%s) sets limits.%s to %v, above the maximum of %v: lower %s.resources.limits.%s", [ref.name, ref.path, name, value, maximum, ref.path, name])
}

warn contains msg if {
	some ref in refs
	names := missing_requests(ref)
	count(names) > 0
	msg := sprintf("container %q (%s) has no %s request, so Kubernetes requests the full limit: set %s", [ref.name, ref.path, concat(" or ", names), concat(", ", [sprintf("%s.resources.requests.%s", [ref.path, n]) | some n in names])])
}
