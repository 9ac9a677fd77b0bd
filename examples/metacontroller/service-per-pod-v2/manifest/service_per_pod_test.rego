package examples.metacontroller.service_per_pod_test

import data.examples.metacontroller.service_per_pod_v2.finalize_service_per_pod
import data.examples.metacontroller.service_per_pod_v2.sync_pod_name_label
import data.examples.metacontroller.service_per_pod_v2.sync_service_per_pod

statefulset := {
	"apiVersion": "apps/v1",
	"kind": "StatefulSet",
	"metadata": {
		"name": "nginx",
		"namespace": "default",
		"annotations": {"service-per-pod-label": "pod-name", "service-per-pod-ports": "80:80,8080:8081"},
	},
	"spec": {"replicas": 3},
}

sync(object, services) := {
	"controller": {},
	"object": object,
	"attachments": {"Service.v1": services},
	"related": {},
	"finalizing": false,
}

test_a_service_per_replica if {
	services := sync_service_per_pod.attachments with input as sync(statefulset, {})
	[s.metadata.name | some s in services] == ["nginx-0", "nginx-1", "nginx-2"]
	services[2] == {
		"apiVersion": "v1",
		"kind": "Service",
		"metadata": {"name": "nginx-2", "labels": {"app": "service-per-pod"}},
		"spec": {
			"selector": {"pod-name": "nginx-2"},
			"ports": [
				{"name": "port-80", "port": 80, "targetPort": 80},
				{"name": "port-8080", "port": 8080, "targetPort": 8081},
			],
		},
	}
}

test_v2_naming_verified_once_the_first_service_is_keyed_namespace_slash_name if {
	sync_service_per_pod.annotations == {"v2-naming-verified": "false"} with input as sync(statefulset, {})
	sync_service_per_pod.annotations == {"v2-naming-verified": "false"} with input as sync(statefulset, {"nginx-0": {}})
	sync_service_per_pod.annotations == {"v2-naming-verified": "true"} with input as sync(statefulset, {"default/nginx-0": {}})
}

test_no_services_for_zero_replicas if {
	none := json.patch(statefulset, [{"op": "replace", "path": "/spec/replicas", "value": 0}])
	sync_service_per_pod.attachments == [] with input as sync(none, {})
}

test_finalize_removes_the_services_then_finishes if {
	finalize := object.union(sync(statefulset, {"nginx-0": {}}), {"finalizing": true})
	finalize_service_per_pod.attachments == [] with input as finalize
	finalize_service_per_pod.finalized == false with input as finalize
	finalize_service_per_pod.finalized == true with input as object.union(sync(statefulset, {}), {"finalizing": true})
}

test_pod_labelled_with_its_name_under_the_annotated_key if {
	pod := {"metadata": {"name": "nginx-2", "annotations": {"pod-name-label": "pod-name"}}}
	sync_pod_name_label.labels == {"pod-name": "nginx-2"} with input as sync(pod, {})
}
