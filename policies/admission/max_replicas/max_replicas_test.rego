package admission.max_replicas_test

import data.admission.max_replicas
import data.lib.fixtures

spec := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}

with_replicas(o, n) := json.patch(o, [{"op": "add", "path": "/spec/replicas", "value": n}])

without_replicas(o) := json.patch(o, [{"op": "remove", "path": "/spec/replicas"}])

# scale(n) is the Scale object sent to the scale subresource of a workload
# named web.
scale(n) := {
	"apiVersion": "autoscaling/v1",
	"kind": "Scale",
	"metadata": {"name": "web", "namespace": "shop"},
	"spec": {"replicas": n},
}

scale_review(resource, group, operation, n, old) := {"request": {
	"uid": fixtures.uid,
	"kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
	"resource": {"group": group, "version": "v1", "resource": resource},
	"subResource": "scale",
	"name": "web",
	"namespace": "shop",
	"operation": operation,
	"userInfo": {"username": "jane@example.com"},
	"object": scale(n),
	"oldObject": old,
	"dryRun": false,
}}

hpa(n) := {
	"apiVersion": "autoscaling/v2",
	"kind": "HorizontalPodAutoscaler",
	"metadata": {"name": "web", "namespace": "shop"},
	"spec": {
		"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas": 2,
		"maxReplicas": n,
	},
}

replicated := [fixtures.deployment(spec), fixtures.statefulset(spec), fixtures.replicaset(spec)]

test_replicas_up_to_the_maximum_are_allowed if {
	every w in replicated {
		count(max_replicas.deny) == 0 with input as fixtures.create(with_replicas(w, 10))
		count(max_replicas.warn) == 0 with input as fixtures.create(with_replicas(w, 10))
	}
}

test_replicas_above_the_maximum_are_denied if {
	every w in replicated {
		count(max_replicas.deny) == 1 with input as fixtures.create(with_replicas(w, 11))
	}
}

test_exact_message if {
	max_replicas.deny == {`Deployment "web-deployment" asks for 25 replicas, more than the maximum of 10 in namespace shop: set spec.replicas to 10 or less`} with input as fixtures.create(with_replicas(fixtures.deployment(spec), 25))
}

test_replication_controller_is_capped if {
	rc := {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "legacy", "namespace": "shop"}, "spec": {"replicas": 50, "template": {"spec": spec}}}
	count(max_replicas.deny) == 1 with input as fixtures.review("CREATE", rc, null)
}

test_missing_replicas_defaults_to_one if {
	count(max_replicas.deny) == 0 with input as fixtures.create(without_replicas(fixtures.deployment(spec)))
		with data.params.max_replicas.max as 1
	count(max_replicas.deny) == 1 with input as fixtures.create(without_replicas(fixtures.deployment(spec)))
		with data.params.max_replicas.max as 0
}

test_daemonsets_and_pods_are_not_capped if {
	count(max_replicas.deny) == 0 with input as fixtures.create(fixtures.daemonset(spec))
		with data.params.max_replicas.max as 0
	count(max_replicas.deny) == 0 with input as fixtures.create(fixtures.pod(spec))
		with data.params.max_replicas.max as 0
}

test_maximum_comes_from_params if {
	deployment := with_replicas(fixtures.deployment(spec), 30)
	count(max_replicas.deny) == 0 with input as fixtures.create(deployment)
		with data.params.max_replicas.max as 50
	deny := max_replicas.deny with input as fixtures.create(deployment)
		with data.params.max_replicas.max as 20
	deny == {`Deployment "web-deployment" asks for 30 replicas, more than the maximum of 20 in namespace shop: set spec.replicas to 20 or less`}
}

test_namespace_override if {
	deployment := with_replicas(fixtures.deployment(spec), 30)
	count(max_replicas.deny) == 0 with input as fixtures.create(deployment)
		with data.params.max_replicas.namespaces as {"shop": 40}
	count(max_replicas.deny) == 1 with input as fixtures.create(deployment)
		with data.params.max_replicas.namespaces as {"other": 40}
	count(max_replicas.deny) == 1 with input as fixtures.create(deployment)
		with data.params.max_replicas as {"max": 100, "namespaces": {"shop": 5}}
}

test_scaling_up_past_the_maximum_is_denied if {
	old := with_replicas(fixtures.deployment(spec), 3)
	count(max_replicas.deny) == 1 with input as fixtures.update(with_replicas(old, 12), old)
}

test_scale_subresource_is_capped if {
	request := scale_review("deployments", "apps", "UPDATE", 40, scale(3))
	max_replicas.deny == {`deployments/scale "web" asks for 40 replicas, more than the maximum of 10 in namespace shop: set spec.replicas to 10 or less`} with input as request
	count(max_replicas.deny) == 0 with input as scale_review("statefulsets", "apps", "UPDATE", 4, scale(3))
}

test_scaling_down_a_workload_above_the_maximum_only_warns if {
	legacy := with_replicas(fixtures.deployment(spec), 30)
	smaller := with_replicas(legacy, 20)
	count(max_replicas.deny) == 0 with input as fixtures.update(smaller, legacy)
	max_replicas.warn == {`Deployment "web-deployment" keeps 20 replicas, more than the maximum of 10 in namespace shop: scale it down to 10 or less`} with input as fixtures.update(smaller, legacy)
	count(max_replicas.deny) == 0 with input as scale_review("deployments", "apps", "UPDATE", 20, scale(30))
}

test_unchanged_replicas_above_the_maximum_only_warn if {
	legacy := with_replicas(fixtures.deployment(spec), 30)
	relabelled := json.patch(legacy, [{"op": "add", "path": "/metadata/labels/tier", "value": "web"}])
	count(max_replicas.deny) == 0 with input as fixtures.update(relabelled, legacy)
	count(max_replicas.warn) == 1 with input as fixtures.update(relabelled, legacy)
}

test_growing_a_workload_above_the_maximum_is_denied if {
	legacy := with_replicas(fixtures.deployment(spec), 30)
	count(max_replicas.deny) == 1 with input as fixtures.update(with_replicas(legacy, 31), legacy)
}

test_hpa_max_replicas_is_capped if {
	max_replicas.deny == {`HorizontalPodAutoscaler "web" asks for 50 replicas, more than the maximum of 10 in namespace shop: set spec.maxReplicas to 10 or less`} with input as fixtures.create(hpa(50))
	count(max_replicas.deny) == 0 with input as fixtures.create(hpa(10))
}

test_delete_is_not_reviewed if {
	deployment := with_replicas(fixtures.deployment(spec), 100)
	count(max_replicas.deny) == 0 with input as fixtures.delete(deployment)
	count(max_replicas.warn) == 0 with input as fixtures.delete(deployment)
}

test_match_covers_scale_subresources if {
	resources := {r | some rule in max_replicas.match.rules; some r in rule.resources}
	every r in ["deployments/scale", "statefulsets/scale", "replicasets/scale"] {
		r in resources
	}
}
