package controllers.service_per_pod_test

import data.controllers.service_per_pod

sts := {
	"apiVersion": "apps/v1",
	"kind": "StatefulSet",
	"metadata": {
		"name": "nginx",
		"namespace": "web",
		"annotations": {
			"service-per-pod-label": "statefulset.kubernetes.io/pod-name",
			"service-per-pod-ports": "80:8080, 443",
		},
	},
	"spec": {"replicas": 2},
}

sync(obj, services) := {
	"controller": {"kind": "DecoratorController", "metadata": {"name": "service-per-pod"}},
	"object": obj,
	"attachments": {"Service.v1": services},
	"related": {},
	"finalizing": false,
}

finalize(obj, services) := object.union(sync(obj, services), {"finalizing": true})

test_one_service_per_pod_selecting_it_by_the_named_label if {
	services := service_per_pod.attachments with input as sync(sts, {})
	[s.metadata.name | some s in services] == ["nginx-0", "nginx-1"]
	services[1].spec.selector == {"statefulset.kubernetes.io/pod-name": "nginx-1"}
}

test_ports_with_and_without_target_port if {
	services := service_per_pod.attachments with input as sync(sts, {})
	services[0].spec.ports == [
		{"name": "port-80", "port": 80, "targetPort": 8080, "protocol": "TCP"},
		{"name": "port-443", "port": 443, "targetPort": 443, "protocol": "TCP"},
	]
}

test_replicas_default_to_one_and_zero_means_none if {
	one := object.remove(sts, ["spec"])
	count(service_per_pod.attachments) == 1 with input as sync(one, {})
	none := json.patch(sts, [{"op": "replace", "path": "/spec/replicas", "value": 0}])
	service_per_pod.attachments == [] with input as sync(none, {})
}

test_finalize_wants_no_services_and_waits_for_them_to_go if {
	service_per_pod.attachments == [] with input as finalize(sts, {"nginx-0": {}})
	not service_per_pod.finalized with input as finalize(sts, {"nginx-0": {}})
	service_per_pod.finalized with input as finalize(sts, {})
}

test_sync_never_finalizes if {
	not service_per_pod.finalized with input as sync(sts, {})
}

test_annotation_counts_observed_services if {
	service_per_pod.annotations == {"service-per-pod/services": "0"} with input as sync(sts, {})
	service_per_pod.annotations == {"service-per-pod/services": "2"} with input as sync(sts, {"a": {}, "b": {}})
}
