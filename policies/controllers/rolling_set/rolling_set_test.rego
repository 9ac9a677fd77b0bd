package controllers.rolling_set_test

import data.controllers.rolling_set

parent := {
	"apiVersion": "examples.regokite.dev/v1alpha1",
	"kind": "RollingSet",
	"metadata": {"name": "web", "namespace": "ns"},
	"spec": {"replicas": 3, "template": {"version": "v2"}},
}

sync(workers) := {
	"controller": {},
	"parent": parent,
	"children": {"Worker.examples.regokite.dev/v1alpha1": workers},
	"related": {},
	"finalizing": false,
}

worker(name, version, generation, ready) := {
	"metadata": {"name": name, "generation": generation},
	"spec": {"version": version},
	"status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": ready}]},
}

test_replicas_workers_at_the_template if {
	workers := rolling_set.children with input as sync({})
	[w.metadata.name | some w in workers] == ["web-0", "web-1", "web-2"]
	every w in workers {
		w.spec == {"version": "v2"}
	}
}

test_zero_replicas_no_workers if {
	none := json.patch(parent, [{"op": "replace", "path": "/spec/replicas", "value": 0}])
	rolling_set.children == [] with input as object.union(sync({}), {"parent": none})
}

test_status_counts_ready_for_the_current_generation_and_updated if {
	workers := {
		"web-0": worker("web-0", "v2", 1, "True"),
		"web-1": worker("web-1", "v1", 2, "True"), # updated since it reported Ready
		"web-2": worker("web-2", "v1", 1, "False"),
	}
	rolling_set.status == {"replicas": 3, "readyReplicas": 1, "updatedReplicas": 1} with input as sync(workers)
}
