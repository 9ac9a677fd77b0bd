# Metacontroller's service-per-pod-v2 example, its sync-service-per-pod.jsonnet
# hook as Rego (hook version v2: attachments keyed namespace/name).
#
# A StatefulSet annotated service-per-pod-label=<key> and
# service-per-pod-ports="port:targetPort,..." gets a Service <name>-<index>
# per replica, selecting that Pod by <key>=<name>-<index>.
package examples.metacontroller.service_per_pod_v2.sync_service_per_pod

statefulset := input.object

# The parent gets v2-naming-verified: "true" once its first Service is found
# under the key namespace/name, as hook version v2 names attachments.
first_service_key := sprintf("%s/%s-0", [statefulset.metadata.namespace, statefulset.metadata.name])

services := object.get(input.attachments, "Service.v1", {})

default verified := "false"

verified := "true" if services[first_service_key]

annotations := {"v2-naming-verified": verified}

label_key := statefulset.metadata.annotations["service-per-pod-label"]

port(portnums) := {
	"name": sprintf("port-%d", [to_number(parts[0])]),
	"port": to_number(parts[0]),
	"targetPort": to_number(parts[1]),
} if {
	parts := split(portnums, ":")
}

ports := [port(portnums) | some portnums in split(statefulset.metadata.annotations["service-per-pod-ports"], ",")]

service(name) := {
	"apiVersion": "v1",
	"kind": "Service",
	"metadata": {"name": name, "labels": {"app": "service-per-pod"}},
	"spec": {
		"selector": {label_key: name},
		"ports": ports,
	},
}

attachments := [service(sprintf("%s-%d", [statefulset.metadata.name, index])) |
	some index in numbers.range(0, statefulset.spec.replicas - 1)
	index >= 0 # std.range(0, -1) is empty; numbers.range(0, -1) is [0, -1]
	index < statefulset.spec.replicas
]
