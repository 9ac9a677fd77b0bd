package controllers.config_bundle_test

import data.controllers.config_bundle

parent := {
	"apiVersion": "example.com/v1",
	"kind": "ConfigBundle",
	"metadata": {"name": "b", "namespace": "ns"},
	"spec": {"configs": [{"a": "1"}, {"b": "2"}, {"c": "3"}]},
}

request(observed, finalizing) := {
	"controller": {},
	"parent": parent,
	"children": {"ConfigMap.v1": observed},
	"related": {},
	"finalizing": finalizing,
}

all_three := {"b-0": {}, "b-1": {}, "b-2": {}}

test_sync_creates_one_configmap_per_entry if {
	names := [c.metadata.name | some c in config_bundle.children] with input as request({}, false)
	names == ["b-0", "b-1", "b-2"]
	config_bundle.children[1].data == {"b": "2"} with input as request({}, false)
	config_bundle.status == {"phase": "Ready", "configMaps": 0} with input as request({}, false)
	not config_bundle.finalized with input as request({}, false)
}

test_finalize_removes_the_last_observed_one_first if {
	names := [c.metadata.name | some c in config_bundle.children] with input as request(all_three, true)
	names == ["b-0", "b-1"]
	after := [c.metadata.name | some c in config_bundle.children] with input as request({"b-0": {}}, true)
	after == []
}

test_finalized_only_when_nothing_is_observed if {
	config_bundle.finalized == false with input as request({"b-0": {}}, true)
	config_bundle.finalized == true with input as request({}, true)
	config_bundle.status == {"phase": "Finalizing", "remaining": 0} with input as request({}, true)
}

test_events_report_teardown_progress if {
	config_bundle.events == {{"type": "Normal", "reason": "TearingDown", "message": "3 ConfigMaps left"}} with input as request(all_three, true)
	count(config_bundle.events) == 0 with input as request({}, true)
}
