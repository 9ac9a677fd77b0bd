# Metacontroller's service-per-pod example as a DecoratorController hook.
#
# Input: {controller, object, attachments, related, finalizing}; object is a
# StatefulSet annotated with
#   service-per-pod-label: the Pod label whose value is the Pod's name
#                          (e.g. statefulset.kubernetes.io/pod-name)
#   service-per-pod-ports: "port[:targetPort],..." (e.g. "80:8080,443")
# Outputs: attachments (one Service per replica), finalized, annotations.
package controllers.service_per_pod

sts := input.object

annotations_of(obj) := object.get(obj, ["metadata", "annotations"], {})

label_key := annotations_of(sts)["service-per-pod-label"]

default replicas := 1

replicas := sts.spec.replicas if is_number(sts.spec.replicas)

# "80:8080" -> port 80 to target port 8080; "443" -> 443 to 443.
# protocol is spelled out: server-side apply keys Service ports by port and protocol.
port(spec) := {
	"name": sprintf("port-%s", [parts[0]]),
	"port": to_number(parts[0]),
	"targetPort": to_number(parts[1]),
	"protocol": "TCP",
} if {
	parts := split(trim_space(spec), ":")
	count(parts) == 2
}

port(spec) := {"name": sprintf("port-%s", [spec]), "port": to_number(spec), "targetPort": to_number(spec), "protocol": "TCP"} if {
	not contains(spec, ":")
}

ports := [port(trim_space(p)) |
	some p in split(annotations_of(sts)["service-per-pod-ports"], ",")
	trim_space(p) != ""
]

pod_names := [sprintf("%s-%d", [sts.metadata.name, i]) | some i in numbers.range(0, replicas - 1)] if replicas > 0

default pod_names := []

service(name) := {
	"apiVersion": "v1",
	"kind": "Service",
	"metadata": {
		"name": name,
		"labels": {"app.kubernetes.io/managed-by": "service-per-pod"},
	},
	"spec": {
		"selector": {label_key: name},
		"ports": ports,
	},
}

# While finalizing, no Services are wanted: regokite deletes them, and
# finalized turns true once none is observed.
attachments := [service(name) | some name in pod_names] if not input.finalizing

attachments := [] if input.finalizing

finalized := count(object.get(input, ["attachments", "Service.v1"], {})) == 0 if input.finalizing

# Record how many Services the StatefulSet has (an annotation this decorator owns).
annotations := {"service-per-pod/services": format_int(count(object.get(input, ["attachments", "Service.v1"], {})), 10)}
