# Metacontroller's service-per-pod example, its sync-service-per-pod.jsonnet
# hook as Rego.
#
# A StatefulSet annotated service-per-pod-label=<key> and
# service-per-pod-ports="port:targetPort,..." gets a Service <name>-<index>
# per replica, selecting that Pod by <key>=<name>-<index>.
package examples.metacontroller.service_per_pod.sync_service_per_pod

statefulset := input.object

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
