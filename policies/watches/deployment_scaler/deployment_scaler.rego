# Starkite's deployment scaler as a Watch policy: a Deployment labelled
# enforce-max-replicas=true never keeps more than max_replicas replicas.
#
# Input (regokite Watch): {event, object, oldObject, params}.
# Parameters: params.max_replicas (default 3; `--var max_replicas=5`).
package watches.deployment_scaler

default max_replicas := 3

max_replicas := input.params.max_replicas if is_number(input.params.max_replicas)

deployment := input.object

enforced if deployment.metadata.labels["enforce-max-replicas"] == "true"

# Kubernetes defaults spec.replicas to 1.
replicas := object.get(deployment, ["spec", "replicas"], 1)

too_many if {
	input.event != "DELETED"
	deployment.kind == "Deployment"
	enforced
	replicas > max_replicas
}

where := sprintf("%s/%s", [deployment.metadata.namespace, deployment.metadata.name])

patch := [{"op": "replace", "path": "/spec/replicas", "value": max_replicas}] if too_many

events contains {
	"type": "Normal",
	"reason": "ScaledDown",
	"message": sprintf("replicas capped from %d to %d (enforce-max-replicas=true)", [replicas, max_replicas]),
} if too_many

log contains sprintf("%s: %d replicas, more than %d: scaling down", [where, replicas, max_replicas]) if too_many
