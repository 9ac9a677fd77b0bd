package admission.default_labels_test

import data.admission.default_labels
import data.lib.fixtures

spec := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}

# patched(o, ops) applies a set of patch operations to o.
patched(o, ops) := json.patch(o, [op | some op in ops])

patch_for(o) := patch if {
	patch := default_labels.patch with input as fixtures.create(o)
}

test_missing_label_is_added_with_escaped_pointer if {
	patch_for(fixtures.pod(spec)) == {{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "regokite"}}
}

test_patched_object_carries_the_label if {
	deployment := fixtures.deployment(spec)
	result := patched(deployment, patch_for(deployment))
	result.metadata.labels == object.union(fixtures.labels, {"app.kubernetes.io/managed-by": "regokite"})
	result.spec == deployment.spec
}

test_every_kind_is_labelled if {
	every w in fixtures.workloads(spec) {
		ops := default_labels.patch with input as fixtures.create(w)
		patched(w, ops).metadata.labels["app.kubernetes.io/managed-by"] == "regokite"
	}
}

test_pod_template_is_left_alone if {
	deployment := fixtures.deployment(spec)
	patched(deployment, patch_for(deployment)).spec.template.metadata.labels == fixtures.labels
}

test_object_without_labels_gets_the_whole_labels_object if {
	service := {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}, "spec": {}}
	patch_for(service) == {{"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "regokite"}}}
	patched(service, patch_for(service)).metadata == {"name": "web", "namespace": "shop", "labels": {"app.kubernetes.io/managed-by": "regokite"}}
}

test_null_labels_are_replaced if {
	service := {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": null}}
	patch_for(service) == {{"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "regokite"}}}
	patched(service, patch_for(service)).metadata.labels == {"app.kubernetes.io/managed-by": "regokite"}
}

test_object_without_metadata_gets_metadata if {
	bare := {"apiVersion": "v1", "kind": "ConfigMap", "data": {}}
	patch_for(bare) == {{"op": "add", "path": "/metadata", "value": {"labels": {"app.kubernetes.io/managed-by": "regokite"}}}}
	patched(bare, patch_for(bare)).metadata.labels == {"app.kubernetes.io/managed-by": "regokite"}
}

test_labelled_object_needs_no_patch if {
	configmap := json.patch(fixtures.configmap, [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "regokite"}])
	count(patch_for(configmap)) == 0
}

test_existing_value_is_never_overwritten if {
	configmap := json.patch(fixtures.configmap, [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "helm"}])
	count(patch_for(configmap)) == 0
}

test_empty_existing_value_is_kept if {
	configmap := json.patch(fixtures.configmap, [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": ""}])
	count(patch_for(configmap)) == 0
}

test_defaults_come_from_params if {
	defaults := {"team": "platform", "example.com/cost~center": "42", "owner": "ignored"}
	patch := patch_for(fixtures.configmap) with data.params.default_labels.labels as defaults
	patch == {
		{"op": "add", "path": "/metadata/labels/team", "value": "platform"},
		{"op": "add", "path": "/metadata/labels/example.com~1cost~0center", "value": "42"},
	}
	patched(fixtures.configmap, patch).metadata.labels == object.union(fixtures.labels, {"team": "platform", "example.com/cost~center": "42"})
}

test_params_for_unlabelled_object_add_one_object if {
	bare := {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
	patch := patch_for(bare) with data.params.default_labels.labels as {"a/b": "1", "c": "2"}
	patch == {{"op": "add", "path": "/metadata/labels", "value": {"a/b": "1", "c": "2"}}}
}

test_no_defaults_no_patch if {
	count(patch_for(fixtures.configmap)) == 0 with data.params.default_labels.labels as {}
}

test_update_removing_the_label_gets_it_back if {
	old := json.patch(fixtures.configmap, [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "regokite"}])
	count(default_labels.patch) == 1 with input as fixtures.update(fixtures.configmap, old)
}

test_delete_is_not_patched if {
	count(default_labels.patch) == 0 with input as fixtures.delete(fixtures.configmap)
}

test_no_deny_from_a_mutating_policy if {
	not default_labels.deny with input as fixtures.create(fixtures.configmap)
}

test_mutation_failures_do_not_block_requests if {
	default_labels.failure_policy == "Ignore"
}
