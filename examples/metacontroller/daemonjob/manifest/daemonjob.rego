# Metacontroller's daemonjob example (sync.py) as a Rego sync hook.
#
# A DaemonJob runs its Pod template once on every node: a DaemonSet
# <name>-dj whose Pods run the job's containers as init containers, then a
# pause container. Once every scheduled Pod is ready the job is complete: its
# status is frozen with condition Complete=True and the DaemonSet is deleted.
package examples.metacontroller.daemonjob

job := input.parent

child_name := concat("", [job.metadata.name, "-dj"])

observed_daemon := object.get(input.children["DaemonSet.apps/v1"], child_name, {})

# Finished: every scheduled Pod is ready (desiredNumberScheduled defaults to 1, numberReady to 0).
finished(obj) if {
	desired := object.get(obj.status, "desiredNumberScheduled", 1)
	desired == object.get(obj.status, "numberReady", 0)
	desired > 0
}

complete(value) := [{"type": "Complete", "status": value}]

# Once finished, freeze the status and delete the DaemonSet.
status := object.union(job.status, {"conditions": complete("True")}) if finished(job)

children := [] if finished(job)

# Otherwise the status is the DaemonSet's, with a Complete condition.
status := object.union(object.get(observed_daemon, "status", {}), {"conditions": complete("True")}) if {
	not finished(job)
	finished(observed_daemon)
}

status := object.union(object.get(observed_daemon, "status", {}), {"conditions": complete("False")}) if {
	not finished(job)
	not finished(observed_daemon)
}

children := [daemon] if not finished(job)

template := job.spec.template

pause := {
	"name": "pause",
	"image": object.get(job.spec, "pauseImage", "gcr.io/google_containers/pause"),
	"resources": {"requests": {"cpu": "10m"}},
}

# Upstream builds the DaemonSet from a deep copy of the DaemonJob and replaces
# apiVersion, kind, metadata and spec: any other field (status) is carried over.
daemon := object.union(object.remove(job, ["apiVersion", "kind", "metadata", "spec"]), {
	"apiVersion": "apps/v1",
	"kind": "DaemonSet",
	"metadata": {"name": child_name, "labels": template.metadata.labels},
	"spec": {
		"template": object.union(template, {"spec": object.union(template.spec, {
			"initContainers": template.spec.containers,
			"containers": [pause],
		})}),
		"selector": {"matchLabels": template.metadata.labels},
	},
})
