# Metacontroller's indexedjob example (sync.py) as a Rego sync hook.
#
# An IndexedJob runs `completions` Pods <name>-<index>, at most `parallelism`
# at a time, each with env JOB_INDEX=<index>. Status counts the Pods by phase
# and has condition Complete; once the job has finished (Complete or Failed)
# its status is frozen and only the Pods still observed are kept.
package examples.metacontroller.indexedjob

job := input.parent

# Pods named <job name>-<index>, by index.
observed_pods[index] := pod if {
	some name, pod in input.children["Pod.v1"]
	index := pod_index(job.metadata.name, name)
}

pod_index(base, name) := to_number(parts[2]) if {
	parts := regex.find_all_string_submatch_n(`^(.*)-(\d+)$`, name, 1)[0]
	parts[1] == base
}

phase(pod) := object.get(pod, ["status", "phase"], null)

succeeded := count([i | some i, pod in observed_pods; phase(pod) == "Succeeded"])

failed := count([i | some i, pod in observed_pods; phase(pod) == "Failed"])

active := (count(observed_pods) - succeeded) - failed

finished if {
	some condition in object.get(job, ["status", "conditions"], [])
	condition.type in {"Complete", "Failed"}
	condition.status == "True"
}

completions := object.get(job.spec, "completions", 1)

parallelism := object.get(job.spec, "parallelism", 1)

new_pod(index) := object.union(template, {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": object.union(object.get(template, "metadata", {}), {"name": sprintf("%s-%d", [job.metadata.name, index])}),
	"spec": object.union(template.spec, {"containers": [with_index(c, index) | some c in template.spec.containers]}),
})

template := job.spec.template

with_index(container, index) := object.union(container, {"env": array.concat(
	object.get(container, "env", []),
	[{"name": "JOB_INDEX", "value": format_int(index, 10)}],
)})

# A finished job: its status as it is, and the Pods still observed (Pod GC may delete them).
status := job.status if finished

children := [new_pod(index) | some index, _ in observed_pods] if finished

status := {
	"active": active,
	"succeeded": succeeded,
	"failed": failed,
	"conditions": [{"type": "Complete", "status": python_bool(succeeded == completions)}],
} if not finished

python_bool(true) := "True"

python_bool(false) := "False"

# The lowest missing indices, as many as parallelism leaves room for.
missing := [index | some index in numbers.range(0, completions - 1); not observed_pods[index]]

new_indices := array.slice(missing, 0, parallelism - active)

children := array.concat(
	[new_pod(index) | some index, _ in observed_pods],
	[new_pod(index) | some index in new_indices],
) if not finished
