# Metacontroller's catset example (sync.js) as a Rego sync and finalize hook.
#
# A CatSet is a StatefulSet written as a CompositeController: Pods
# <name>-<ordinal> created one at a time in order, each after all lower
# ordinals are Running and Ready, removed from the highest ordinal down, each
# with a PersistentVolumeClaim per volumeClaimTemplate (kept after a scale
# down, deleted with the CatSet). While the CatSet is deleted it scales to zero,
# and is finalized once no Pod is left.
package examples.metacontroller.catset

catset := input.parent

# Finalizing scales the CatSet down to zero replicas.
replicas := 0 if input.finalizing

replicas := catset.spec.replicas if not input.finalizing

finalized := count(observed_pods) == 0 if input.finalizing

# <base>-<digits> -> the number; -1 for another name.
ordinal(base, name) := to_number(match[2]) if {
	match := regex.find_all_string_submatch_n(`^(.*)-(\d+)$`, name, 1)[0]
	match[1] == base
} else := -1

# Observed Pods by ordinal.
observed_pods[n] := pod if {
	some pod in input.children["Pod.v1"]
	n := ordinal(catset.metadata.name, pod.metadata.name)
	n >= 0
}

# The status of the first condition of that type.
condition_status(pod, type) := statuses[0] if {
	statuses := [c.status | some c in pod.status.conditions; c.type == type]
	count(statuses) > 0
} else := "Unknown"

running_and_ready(pod) if {
	pod.status.phase == "Running"
	not pod.metadata.deletionTimestamp
	condition_status(pod, "Ready") == "True"
}

# How many Pods from ordinal 0 up are Running and Ready, at most replicas.
ready := min({n |
	some n in numbers.range(0, replicas)
	not_ready_or_last(n)
})

not_ready_or_last(n) if n == replicas

not_ready_or_last(n) if not ready_pod(n)

# (A helper, so `not` never meets an undefined argument: OPA and regorus read that differently.)
ready_pod(n) if running_and_ready(observed_pods[n])

status := {"replicas": count(observed_pods), "readyReplicas": ready}

# Every observed Pod, plus the next missing one when all below it are ready.
kept := {n | some n, _ in observed_pods} | {n | some n in [ready]; ready < replicas}

# Once all are ready, the highest ordinal beyond replicas goes.
desired_ordinals := kept - {max(kept)} if {
	ready == replicas
	count(kept) > 0
	max(kept) >= replicas
} else := kept

# Pods in descending order (the order of a rolling update), then PVCs.
children := array.concat(
	[new_pod(n) | some n in array.reverse(sort(desired_ordinals))],
	pvcs,
)

templates := catset.spec.volumeClaimTemplates if is_array(catset.spec.volumeClaimTemplates)

new_pod(n) := object.union(catset.spec.template, {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {"name": pod_name(n)},
	"spec": object.union({"hostname": pod_name(n), "subdomain": catset.spec.serviceName}, pod_volumes(n)),
})

pod_name(n) := sprintf("%s-%d", [catset.metadata.name, n])

pod_volumes(n) := {"volumes": array.concat(object.get(catset.spec.template.spec, "volumes", []), [
	{"name": t.metadata.name, "persistentVolumeClaim": {"claimName": sprintf("%s-%s", [t.metadata.name, pod_name(n)])}} |
		some t in templates
])} if templates

pod_volumes(_) := {} if not templates

new_pvc(name, template) := object.union(template, {
	"apiVersion": "v1",
	"kind": "PersistentVolumeClaim",
	"metadata": {"name": name},
})

pvc_base(template) := sprintf("%s-%s", [template.metadata.name, catset.metadata.name])

# A PVC per template and ordinal below replicas, and the existing ones beyond
# (retained after a scale down, deleted with the CatSet).
pvcs := [pvc |
	some template in templates
	some pvc in array.concat(
		[new_pvc(sprintf("%s-%d", [pvc_base(template), i]), template) |
			some i in numbers.range(0, replicas - 1)
			i >= 0
			i < replicas
		],
		[new_pvc(observed.metadata.name, template) |
			some observed in input.children["PersistentVolumeClaim.v1"]
			startswith(observed.metadata.name, pvc_base(template))
			ordinal(pvc_base(template), observed.metadata.name) >= replicas
		],
	)
] if templates

pvcs := [] if not templates
