package examples.metacontroller.update_strategy_test

import data.examples.metacontroller.update_strategy

sync(spec) := {
	"controller": {},
	"parent": {"apiVersion": "ctl.example.com/v1", "kind": "RecreateDemo", "metadata": {"name": "rcd-instance"}, "spec": spec},
	"children": {"ConfigMap.v1": {}},
	"related": {},
	"finalizing": false,
}

test_a_configmap_with_the_config_data if {
	update_strategy.children == [{
		"apiVersion": "v1",
		"kind": "ConfigMap",
		"metadata": {"name": "rcd-instance-data"},
		"data": {"value": "v2"},
	}] with input as sync({"configData": "v2"})
	update_strategy.status == {"observedConfigData": "v2"} with input as sync({"configData": "v2"})
}

test_config_data_defaults_to_initial if {
	update_strategy.children[0].data == {"value": "initial"} with input as sync({})
	update_strategy.status == {"observedConfigData": "initial"} with input as sync({})
}
