# A CompositeController with a finalize hook: a ConfigBundle owns one
# ConfigMap per entry of spec.configs. When the bundle is deleted, the
# finalize hook tears the ConfigMaps down in order (the last entry first,
# one at a time) and reports `finalized` only once it observes none left.
# The same package serves both hooks; `input.finalizing` tells them apart.
package controllers.config_bundle

configs := object.get(input.parent, ["spec", "configs"], [])

observed := object.get(input, ["children", "ConfigMap.v1"], {})

name(i) := sprintf("%s-%d", [input.parent.metadata.name, i])

configmap(i) := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": name(i)},
	"data": configs[i],
}

# While syncing: every entry. While finalizing: every observed entry but the
# highest-numbered one, so they go away one by one, last first.
children := [configmap(i) | some i, _ in configs] if not input.finalizing

children := [configmap(i) | some i, _ in configs; name(i) in object.keys(observed); i < last_observed] if {
	input.finalizing
}

last_observed := max([i | some i, _ in configs; name(i) in object.keys(observed)])

finalized := count(observed) == 0 if input.finalizing

status := {"phase": "Finalizing", "remaining": count(observed)} if input.finalizing

status := {"phase": "Ready", "configMaps": count(observed)} if not input.finalizing

events contains {"type": "Normal", "reason": "TearingDown", "message": sprintf("%d ConfigMaps left", [count(observed)])} if {
	input.finalizing
	count(observed) > 0
}
