package examples.metacontroller.daemonjob_test

import data.examples.metacontroller.daemonjob

job := {
	"apiVersion": "ctl.example.com/v1",
	"kind": "DaemonJob",
	"metadata": {"name": "hello-world", "uid": "u1"},
	"spec": {"template": {
		"metadata": {"labels": {"app": "hello-world"}},
		"spec": {
			"terminationGracePeriodSeconds": 10,
			"containers": [{"name": "hello-world", "image": "busybox"}],
		},
	}},
}

sync(parent, daemons) := {
	"controller": {},
	"parent": parent,
	"children": {"DaemonSet.apps/v1": daemons},
	"related": {},
	"finalizing": false,
}

test_a_daemonset_running_the_containers_as_init_containers if {
	[daemon] := daemonjob.children with input as sync(job, {})
	daemon == {
		"apiVersion": "apps/v1",
		"kind": "DaemonSet",
		"metadata": {"name": "hello-world-dj", "labels": {"app": "hello-world"}},
		"spec": {
			"template": {
				"metadata": {"labels": {"app": "hello-world"}},
				"spec": {
					"terminationGracePeriodSeconds": 10,
					"initContainers": [{"name": "hello-world", "image": "busybox"}],
					"containers": [{
						"name": "pause",
						"image": "gcr.io/google_containers/pause",
						"resources": {"requests": {"cpu": "10m"}},
					}],
				},
			},
			"selector": {"matchLabels": {"app": "hello-world"}},
		},
	}
}

test_pause_image_from_the_spec if {
	parent := json.patch(job, [{"op": "add", "path": "/spec/pauseImage", "value": "registry.k8s.io/pause:3.9"}])
	[daemon] := daemonjob.children with input as sync(parent, {})
	daemon.spec.template.spec.containers[0].image == "registry.k8s.io/pause:3.9"
}

test_status_is_the_daemonsets_not_yet_complete if {
	observed := {"hello-world-dj": {"status": {"desiredNumberScheduled": 2, "numberReady": 1}}}
	daemonjob.status == {
		"desiredNumberScheduled": 2,
		"numberReady": 1,
		"conditions": [{"type": "Complete", "status": "False"}],
	} with input as sync(job, observed)
	daemonjob.status == {"conditions": [{"type": "Complete", "status": "False"}]} with input as sync(job, {})
}

test_complete_when_every_scheduled_pod_is_ready if {
	observed := {"hello-world-dj": {"status": {"desiredNumberScheduled": 1, "numberReady": 1}}}
	daemonjob.status.conditions == [{"type": "Complete", "status": "True"}] with input as sync(job, observed)
	count(daemonjob.children) == 1 with input as sync(job, observed)
}

test_a_finished_job_freezes_its_status_and_deletes_the_daemonset if {
	status := {"desiredNumberScheduled": 1, "numberReady": 1, "conditions": [{"type": "Complete", "status": "True"}]}
	finished := object.union(job, {"status": status})
	observed := {"hello-world-dj": {"status": {"desiredNumberScheduled": 1, "numberReady": 0}}}
	daemonjob.children == [] with input as sync(finished, observed)
	daemonjob.status == status with input as sync(finished, observed)
}

test_zero_scheduled_pods_is_not_finished if {
	observed := {"hello-world-dj": {"status": {"desiredNumberScheduled": 0, "numberReady": 0}}}
	daemonjob.status.conditions == [{"type": "Complete", "status": "False"}] with input as sync(job, observed)
}
