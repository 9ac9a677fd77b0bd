# A RollingSet: spec.replicas Workers named <parent>-<i>, each with the
# parent's spec.template as its spec. Status counts the Workers that report
# Ready=True for their current generation and those at the latest template.
#
# The hook only states the desired Workers; regokite keeps Workers that are
# not yet updated at their older revision and moves them one at a time.
package controllers.rolling_set

default replicas := 1

replicas := input.parent.spec.replicas if is_number(input.parent.spec.replicas)

template := object.get(input.parent, ["spec", "template"], {})

worker(i) := {
	"apiVersion": "examples.regokite.dev/v1alpha1",
	"kind": "Worker",
	"metadata": {
		"name": sprintf("%s-%d", [input.parent.metadata.name, i]),
		"labels": {"examples.regokite.dev/rolling-set": input.parent.metadata.name},
	},
	"spec": template,
}

children := [worker(i) | some i in numbers.range(0, replicas - 1)] if replicas > 0

default children := []

observed := object.get(input, ["children", "Worker.examples.regokite.dev/v1alpha1"], {})

ready(w) if {
	some c in w.status.conditions
	c.type == "Ready"
	c.status == "True"
	object.get(w.status, "observedGeneration", w.metadata.generation) == w.metadata.generation
}

status := {
	"replicas": count(observed),
	"readyReplicas": count([w | some w in observed; ready(w)]),
	"updatedReplicas": count([w | some w in observed; w.spec == template]),
}
