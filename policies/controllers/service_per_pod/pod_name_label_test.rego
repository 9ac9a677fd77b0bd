package controllers.pod_name_label_test

import data.controllers.pod_name_label

pod(annotations) := {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": {"name": "nginx-0", "namespace": "web", "annotations": annotations},
}

sync(obj) := {"controller": {}, "object": obj, "attachments": {}, "related": {}, "finalizing": false}

test_labels_the_pod_with_its_name_under_the_annotated_key if {
	pod_name_label.labels == {"pod-name": "nginx-0"} with input as sync(pod({"pod-name-label": "pod-name"}))
}

test_no_labels_without_a_key if {
	not pod_name_label.labels with input as sync(pod({"pod-name-label": ""}))
	not pod_name_label.labels with input as sync(pod({}))
}
