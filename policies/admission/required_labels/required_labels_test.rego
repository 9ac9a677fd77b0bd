package admission.required_labels_test

import data.admission.required_labels
import data.lib.fixtures

spec := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1.0"}]}

without_label(o, key) := json.patch(o, [{"op": "remove", "path": concat("", ["/metadata/labels/", key])}])

without_template_labels(o) := json.patch(o, [{"op": "remove", "path": "/spec/template/metadata/labels"}])

test_labelled_workloads_are_allowed if {
	every w in fixtures.workloads(spec) {
		count(required_labels.deny) == 0 with input as fixtures.create(w)
		count(required_labels.warn) == 0 with input as fixtures.create(w)
	}
}

test_missing_owner_is_denied_for_every_kind if {
	every w in fixtures.workloads(spec) {
		some msg in required_labels.deny with input as fixtures.create(without_label(w, "owner"))
		contains(msg, "missing required label(s) owner in metadata.labels")
	}
}

test_exact_message_for_unlabelled_pod if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}, "spec": spec}
	required_labels.deny == {`Pod "web" is missing required label(s) app.kubernetes.io/name, owner in metadata.labels: add them with non-empty values`} with input as fixtures.create(pod)
}

test_generate_name_is_used_when_name_is_missing if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "labels": {"owner": "a"}}, "spec": spec}
	required_labels.deny == {`Pod "web-*" is missing required label(s) app.kubernetes.io/name in metadata.labels: add them with non-empty values`} with input as fixtures.create(pod)
}

test_empty_label_value_counts_as_missing if {
	service := {
		"apiVersion": "v1",
		"kind": "Service",
		"metadata": {"name": "web", "labels": {"app.kubernetes.io/name": "web", "owner": ""}},
		"spec": {"ports": [{"port": 80}]},
	}
	required_labels.deny == {`Service "web" is missing required label(s) owner in metadata.labels: add them with non-empty values`} with input as fixtures.create(service)
}

test_unlabelled_pod_template_is_denied if {
	deployment := without_template_labels(fixtures.deployment(spec))
	required_labels.deny == {`Deployment "web-deployment" is missing required label(s) app.kubernetes.io/name, owner in spec.template.metadata.labels: add them with non-empty values`} with input as fixtures.create(deployment)
}

test_cronjob_template_path_is_named if {
	cronjob := json.patch(fixtures.cronjob(spec), [{"op": "remove", "path": "/spec/jobTemplate/spec/template/metadata/labels/owner"}])
	some msg in required_labels.deny with input as fixtures.create(cronjob)
	contains(msg, "owner in spec.jobTemplate.spec.template.metadata.labels")
}

test_template_without_metadata_is_denied if {
	job := json.patch(fixtures.job(spec), [{"op": "remove", "path": "/spec/template/metadata"}])
	some msg in required_labels.deny with input as fixtures.create(job)
	contains(msg, "in spec.template.metadata.labels")
}

test_object_and_template_are_reported_separately if {
	deployment := without_label(without_template_labels(fixtures.deployment(spec)), "owner")
	count(required_labels.deny) == 2 with input as fixtures.create(deployment)
}

test_template_check_can_be_disabled if {
	deployment := without_template_labels(fixtures.deployment(spec))
	count(required_labels.deny) == 0 with input as fixtures.create(deployment)
		with data.params.required_labels.check_templates as false
}

test_required_labels_come_from_params if {
	deny := required_labels.deny with input as fixtures.create(fixtures.configmap)
		with data.params.required_labels.labels as ["team", "owner"]
	deny == {`ConfigMap "settings" is missing required label(s) team in metadata.labels: add them with non-empty values`}
}

test_no_required_labels_allows_everything if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": spec}
	count(required_labels.deny) == 0 with input as fixtures.create(pod)
		with data.params.required_labels.labels as []
}

test_label_value_must_match_pattern if {
	bad := json.patch(fixtures.pod(spec), [{"op": "replace", "path": "/metadata/labels/owner", "value": "Team A"}])
	deny := required_labels.deny with input as fixtures.create(bad)
		with data.params.required_labels.patterns as {"owner": `^[a-z0-9-]+$`}
	deny == {`Pod "web-pod": label owner="Team A" in metadata.labels does not match the required pattern ^[a-z0-9-]+$: change its value`}
}

test_matching_label_value_is_allowed if {
	count(required_labels.deny) == 0 with input as fixtures.create(fixtures.pod(spec))
		with data.params.required_labels.patterns as {"owner": `^team-[a-z]+$`}
}

test_pattern_for_absent_optional_label_is_ignored if {
	count(required_labels.deny) == 0 with input as fixtures.create(fixtures.pod(spec))
		with data.params.required_labels.patterns as {"cost-center": `^[0-9]+$`}
}

test_update_keeping_labels_is_allowed if {
	deployment := fixtures.deployment(spec)
	scaled := json.patch(deployment, [{"op": "replace", "path": "/spec/replicas", "value": 5}])
	count(required_labels.deny) == 0 with input as fixtures.update(scaled, deployment)
	count(required_labels.warn) == 0 with input as fixtures.update(scaled, deployment)
}

test_update_removing_a_label_is_denied if {
	deployment := fixtures.deployment(spec)
	some msg in required_labels.deny with input as fixtures.update(without_label(deployment, "owner"), deployment)
	contains(msg, "owner in metadata.labels")
}

test_update_of_legacy_object_only_warns if {
	legacy := without_label(fixtures.deployment(spec), "owner")
	scaled := json.patch(legacy, [{"op": "replace", "path": "/spec/replicas", "value": 5}])
	count(required_labels.deny) == 0 with input as fixtures.update(scaled, legacy)
	required_labels.warn == {`Deployment "web-deployment" still lacks required label(s) owner in metadata.labels (it did before this update too): add them; updates that remove required labels are denied`} with input as fixtures.update(scaled, legacy)
}

test_update_of_legacy_object_removing_another_label_is_denied if {
	legacy := without_label(fixtures.deployment(spec), "owner")
	worse := without_label(legacy, "app.kubernetes.io~1name")
	deny := required_labels.deny with input as fixtures.update(worse, legacy)
	deny == {`Deployment "web-deployment" is missing required label(s) app.kubernetes.io/name in metadata.labels: add them with non-empty values`}
	warn := required_labels.warn with input as fixtures.update(worse, legacy)
	count(warn) == 1
}

test_update_changing_a_bad_value_to_another_bad_value_is_denied if {
	params := {"owner": `^team-[a-z]+$`}
	old := json.patch(fixtures.pod(spec), [{"op": "replace", "path": "/metadata/labels/owner", "value": "nobody"}])
	new := json.patch(old, [{"op": "replace", "path": "/metadata/labels/owner", "value": "somebody"}])
	count(required_labels.deny) == 1 with input as fixtures.update(new, old)
		with data.params.required_labels.patterns as params
	count(required_labels.deny) == 0 with input as fixtures.update(old, old)
		with data.params.required_labels.patterns as params
	count(required_labels.warn) == 1 with input as fixtures.update(old, old)
		with data.params.required_labels.patterns as params
}

test_delete_is_not_reviewed if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": spec}
	count(required_labels.deny) == 0 with input as fixtures.delete(pod)
	count(required_labels.warn) == 0 with input as fixtures.delete(pod)
}

test_connect_is_not_reviewed if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": spec}
	count(required_labels.deny) == 0 with input as fixtures.review("CONNECT", pod, null)
}

test_terminating_object_is_not_reviewed if {
	pod := {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "deletionTimestamp": "2024-05-01T10:00:00Z"}, "spec": spec}
	count(required_labels.deny) == 0 with input as fixtures.update(pod, pod)
}

test_match_declares_webhook_rules if {
	every rule in required_labels.match.rules {
		rule.operations == ["CREATE", "UPDATE"]
		count(rule.resources) > 0
	}
	"kube-system" in required_labels.match.excludedNamespaces
}
