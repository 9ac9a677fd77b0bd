package watches.deployment_scaler_test

import data.watches.deployment_scaler

deployment(labels, n) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": {"name": "web", "namespace": "shop", "labels": labels},
	"spec": {"replicas": n},
}

enforced := {"enforce-max-replicas": "true"}

test_scales_a_labelled_deployment_down_to_the_default_maximum if {
	deployment_scaler.patch == [{"op": "replace", "path": "/spec/replicas", "value": 3}] with input as {
		"event": "ADDED",
		"object": deployment(enforced, 10),
		"params": {},
	}
}

test_the_maximum_is_a_parameter if {
	deployment_scaler.patch == [{"op": "replace", "path": "/spec/replicas", "value": 5}] with input as {
		"event": "MODIFIED",
		"object": deployment(enforced, 10),
		"oldObject": deployment(enforced, 2),
		"params": {"max_replicas": 5},
	}
}

test_resync_rechecks if {
	deployment_scaler.patch with input as {"event": "RESYNC", "object": deployment(enforced, 4), "params": {}}
}

test_leaves_an_unlabelled_deployment_alone if {
	not deployment_scaler.patch with input as {"event": "ADDED", "object": deployment({}, 10), "params": {}}
}

test_leaves_a_deployment_labelled_false_alone if {
	not deployment_scaler.patch with input as {
		"event": "ADDED",
		"object": deployment({"enforce-max-replicas": "false"}, 10),
		"params": {},
	}
}

test_at_or_below_the_maximum_nothing_happens if {
	not deployment_scaler.patch with input as {"event": "ADDED", "object": deployment(enforced, 3), "params": {}}
	count(deployment_scaler.events) == 0 with input as {"event": "ADDED", "object": deployment(enforced, 3), "params": {}}
}

test_a_deleted_deployment_is_not_patched if {
	not deployment_scaler.patch with input as {"event": "DELETED", "object": deployment(enforced, 10), "params": {}}
}

test_an_event_and_a_log_line_explain_the_change if {
	inp := {"event": "ADDED", "object": deployment(enforced, 10), "params": {}}
	deployment_scaler.events == {{
		"type": "Normal",
		"reason": "ScaledDown",
		"message": "replicas capped from 10 to 3 (enforce-max-replicas=true)",
	}} with input as inp
	deployment_scaler.log == {"shop/web: 10 replicas, more than 3: scaling down"} with input as inp
}
