# Metacontroller's update-strategy example (the sync.py in its ConfigMap) as
# a Rego sync hook, shared by the OnDelete and the Recreate controller.
#
# Each parent gets a ConfigMap <name>-data with data.value = spec.configData
# (default "initial"); status.observedConfigData records it.
package examples.metacontroller.update_strategy

config_data := object.get(input.parent, ["spec", "configData"], "initial")

status := {"observedConfigData": config_data}

children := [{
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": concat("", [input.parent.metadata.name, "-data"])},
	"data": {"value": config_data},
}]
