package examples.metacontroller.catset_test

import data.examples.metacontroller.catset

parent(replicas) := {
	"apiVersion": "ctl.enisoc.com/v1",
	"kind": "CatSet",
	"metadata": {"name": "web"},
	"spec": {
		"serviceName": "web",
		"replicas": replicas,
		"template": {
			"metadata": {"labels": {"app": "nginx"}},
			"spec": {"volumes": [{"name": "pod-info", "emptyDir": {}}], "containers": [{"name": "nginx"}]},
		},
		"volumeClaimTemplates": [{"metadata": {"name": "www", "labels": {"app": "nginx"}}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
	},
}

ready_pod(n) := {
	"metadata": {"name": sprintf("web-%d", [n])},
	"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}

pending_pod(n) := {"metadata": {"name": sprintf("web-%d", [n])}, "status": {"phase": "Pending"}}

pvc(name) := {"metadata": {"name": name}}

sync(replicas, pods, claims) := {
	"controller": {},
	"parent": parent(replicas),
	"children": {
		"Pod.v1": {p.metadata.name: p | some p in pods},
		"PersistentVolumeClaim.v1": {c.metadata.name: c | some c in claims},
	},
	"related": {},
	"finalizing": false,
}

finalize(replicas, pods, claims) := object.union(sync(replicas, pods, claims), {"finalizing": true})

names(children, kind) := [c.metadata.name | some c in children; c.kind == kind]

test_first_pod_only_and_every_claim if {
	children := catset.children with input as sync(3, [], [])
	names(children, "Pod") == ["web-0"]
	names(children, "PersistentVolumeClaim") == ["www-web-0", "www-web-1", "www-web-2"]
	catset.status == {"replicas": 0, "readyReplicas": 0} with input as sync(3, [], [])
}

test_pod_shape if {
	children := catset.children with input as sync(3, [], [])
	children[0] == {
		"apiVersion": "v1",
		"kind": "Pod",
		"metadata": {"name": "web-0", "labels": {"app": "nginx"}},
		"spec": {
			"hostname": "web-0",
			"subdomain": "web",
			"containers": [{"name": "nginx"}],
			"volumes": [
				{"name": "pod-info", "emptyDir": {}},
				{"name": "www", "persistentVolumeClaim": {"claimName": "www-web-0"}},
			],
		},
	}
	children[1] == {
		"apiVersion": "v1",
		"kind": "PersistentVolumeClaim",
		"metadata": {"name": "www-web-0", "labels": {"app": "nginx"}},
		"spec": {"accessModes": ["ReadWriteOnce"]},
	}
}

test_next_pod_once_all_lower_ordinals_are_ready if {
	children := catset.children with input as sync(3, [ready_pod(0), ready_pod(1)], [])
	names(children, "Pod") == ["web-2", "web-1", "web-0"]
	catset.status == {"replicas": 2, "readyReplicas": 2} with input as sync(3, [ready_pod(0), ready_pod(1)], [])
}

test_waits_while_a_lower_ordinal_is_not_ready if {
	pods := [ready_pod(0), pending_pod(1)]
	names(catset.children, "Pod") == ["web-1", "web-0"] with input as sync(3, pods, [])
	catset.status.readyReplicas == 1 with input as sync(3, pods, [])
}

test_a_terminating_pod_is_not_ready if {
	terminating := json.patch(ready_pod(0), [{"op": "add", "path": "/metadata/deletionTimestamp", "value": "2024-01-01T00:00:00Z"}])
	catset.status.readyReplicas == 0 with input as sync(1, [terminating], [])
}

test_scale_down_removes_the_highest_ordinal_and_keeps_its_claim if {
	pods := [ready_pod(0), ready_pod(1), ready_pod(2), ready_pod(3)]
	claims := [pvc("www-web-3"), pvc("www-web-0")]
	children := catset.children with input as sync(2, pods, claims)
	names(children, "Pod") == ["web-2", "web-1", "web-0"]
	names(children, "PersistentVolumeClaim") == ["www-web-0", "www-web-1", "www-web-3"]
}

test_finalize_scales_to_zero_then_finishes if {
	pods := [ready_pod(0), ready_pod(1)]
	claims := [pvc("www-web-0"), pvc("www-web-1")]
	children := catset.children with input as finalize(2, pods, claims)
	names(children, "Pod") == ["web-0"]
	names(children, "PersistentVolumeClaim") == ["www-web-0", "www-web-1"]
	catset.finalized == false with input as finalize(2, pods, claims)
	catset.status == {"replicas": 2, "readyReplicas": 0} with input as finalize(2, pods, claims)
	catset.finalized == true with input as finalize(2, [], claims)
}

test_not_finalized_outside_finalize if {
	not catset.finalized with input as sync(2, [], [])
}

test_pods_of_other_names_are_not_counted if {
	other := {"metadata": {"name": "webby-0"}, "status": {"phase": "Running"}}
	catset.status.replicas == 0 with input as sync(1, [other], [])
}

test_no_claims_without_templates if {
	no_templates := json.remove(sync(2, [], []), ["parent/spec/volumeClaimTemplates"])
	children := catset.children with input as no_templates
	names(children, "PersistentVolumeClaim") == []
	children[0].spec.volumes == [{"name": "pod-info", "emptyDir": {}}]
}
