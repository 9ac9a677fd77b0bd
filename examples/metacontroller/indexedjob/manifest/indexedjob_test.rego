package examples.metacontroller.indexedjob_test

import data.examples.metacontroller.indexedjob

job := {
	"apiVersion": "ctl.enisoc.com/v1",
	"kind": "IndexedJob",
	"metadata": {"name": "print-index"},
	"spec": {
		"completions": 4,
		"parallelism": 2,
		"template": {
			"metadata": {"labels": {"app": "print-index"}},
			"spec": {
				"restartPolicy": "OnFailure",
				"containers": [{"name": "print-index", "image": "busybox", "env": [{"name": "A", "value": "b"}]}],
			},
		},
	},
}

sync(parent, pods) := {
	"controller": {},
	"parent": parent,
	"children": {"Pod.v1": pods},
	"related": {},
	"finalizing": false,
}

pod(index, phase) := {"metadata": {"name": sprintf("print-index-%d", [index])}, "status": {"phase": phase}}

names(children) := [c.metadata.name | some c in children]

test_first_pods_up_to_parallelism if {
	children := indexedjob.children with input as sync(job, {})
	names(children) == ["print-index-0", "print-index-1"]
	children[1] == {
		"apiVersion": "v1",
		"kind": "Pod",
		"metadata": {"name": "print-index-1", "labels": {"app": "print-index"}},
		"spec": {
			"restartPolicy": "OnFailure",
			"containers": [{
				"name": "print-index",
				"image": "busybox",
				"env": [{"name": "A", "value": "b"}, {"name": "JOB_INDEX", "value": "1"}],
			}],
		},
	}
}

test_next_index_when_one_succeeded if {
	pods := {"print-index-0": pod(0, "Succeeded"), "print-index-1": pod(1, "Running")}
	names(indexedjob.children) == ["print-index-0", "print-index-1", "print-index-2"] with input as sync(job, pods)
	indexedjob.status == {
		"active": 1,
		"succeeded": 1,
		"failed": 0,
		"conditions": [{"type": "Complete", "status": "False"}],
	} with input as sync(job, pods)
}

test_pods_of_other_names_are_ignored if {
	pods := {"other-0": pod(0, "Running"), "print-index-x": pod(0, "Running"), "print-index-0": pod(0, "Failed")}
	names(indexedjob.children) == ["print-index-0", "print-index-1", "print-index-2"] with input as sync(job, pods)
	indexedjob.status.failed == 1 with input as sync(job, pods)
	indexedjob.status.active == 0 with input as sync(job, pods)
}

test_complete_when_every_index_succeeded if {
	pods := {sprintf("print-index-%d", [i]): pod(i, "Succeeded") | some i in numbers.range(0, 3)}
	indexedjob.status.conditions == [{"type": "Complete", "status": "True"}] with input as sync(job, pods)
	count(indexedjob.children) == 4 with input as sync(job, pods)
}

test_a_finished_job_keeps_its_status_and_observed_pods if {
	status := {"succeeded": 3, "conditions": [{"type": "Failed", "status": "True"}]}
	finished := object.union(job, {"status": status})
	pods := {"print-index-3": pod(3, "Succeeded")}
	indexedjob.status == status with input as sync(finished, pods)
	names(indexedjob.children) == ["print-index-3"] with input as sync(finished, pods)
}

test_defaults_one_completion_one_at_a_time if {
	parent := json.remove(job, ["spec/completions", "spec/parallelism"])
	names(indexedjob.children) == ["print-index-0"] with input as sync(parent, {})
}
