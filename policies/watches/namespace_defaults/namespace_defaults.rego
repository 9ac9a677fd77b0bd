# Every namespace labelled regokite.dev/defaults=true gets a ResourceQuota and
# a LimitRange named regokite-defaults (server-side applied, so a change of
# params reaches every namespace on the next event or resync). When the label
# goes (the namespace leaves the watch: DELETED), they are deleted again.
#
# Parameters: params.quota (ResourceQuota spec.hard), params.limits (default
# container limits), params.requests (default container requests).
package watches.namespace_defaults

default quota := {"pods": "50", "requests.cpu": "8", "requests.memory": "16Gi"}

quota := input.params.quota if is_object(input.params.quota)

default limits := {"cpu": "500m", "memory": "512Mi"}

limits := input.params.limits if is_object(input.params.limits)

default requests := {"cpu": "100m", "memory": "128Mi"}

requests := input.params.requests if is_object(input.params.requests)

ns := input.object.metadata.name

name := "regokite-defaults"

labels := {"app.kubernetes.io/managed-by": "regokite", "regokite.dev/watch": "namespace-defaults"}

enabled if {
	input.event != "DELETED"
	input.object.metadata.labels["regokite.dev/defaults"] == "true"
	not input.object.metadata.deletionTimestamp
	object.get(input.object, ["status", "phase"], "Active") == "Active"
}

apply contains {
	"apiVersion": "v1",
	"kind": "ResourceQuota",
	"metadata": {"name": name, "namespace": ns, "labels": labels},
	"spec": {"hard": quota},
} if enabled

apply contains {
	"apiVersion": "v1",
	"kind": "LimitRange",
	"metadata": {"name": name, "namespace": ns, "labels": labels},
	"spec": {"limits": [{"type": "Container", "default": limits, "defaultRequest": requests}]},
} if enabled

delete contains {"apiVersion": "v1", "kind": kind, "name": name, "namespace": ns} if {
	input.event == "DELETED"
	some kind in {"ResourceQuota", "LimitRange"}
}

log contains sprintf("namespace %s: quota and limits applied", [ns]) if {
	enabled
	input.event != "RESYNC"
}
