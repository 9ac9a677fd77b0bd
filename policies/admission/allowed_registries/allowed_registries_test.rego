package admission.allowed_registries_test

import data.admission.allowed_registries
import data.lib.fixtures

good_spec := {
	"initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1.4"}],
	"containers": [
		{"name": "web", "image": "ghcr.io/acme/web:2.0"},
		{"name": "pause", "image": "registry.k8s.io/pause:3.9"},
	],
}

with_image(field, image) := object.union(good_spec, {field: [{"name": "bad", "image": image}]})

deny_for(image) := deny if {
	deny := allowed_registries.deny with input as fixtures.create(fixtures.pod({"containers": [{"name": "bad", "image": image}]}))
}

test_allowed_images_pass_for_every_kind if {
	every w in fixtures.workloads(good_spec) {
		count(allowed_registries.deny) == 0 with input as fixtures.create(w)
		count(allowed_registries.warn) == 0 with input as fixtures.create(w)
	}
}

test_docker_hub_image_without_registry_is_denied if {
	deny_for("nginx:1.25") == {`container "bad" (spec.containers[0]) uses image "nginx:1.25" (docker.io/library/nginx), which is not from an allowed registry: push it to one of ghcr.io/acme/, registry.k8s.io/ and reference it by its full name`}
}

test_docker_hub_user_image_is_denied if {
	some msg in deny_for("acme/web:1")
	contains(msg, "(docker.io/acme/web)")
}

test_registry_name_prefix_trick_is_denied if {
	count(deny_for("registry.k8s.io.evil.com/pause:3.9")) == 1
	count(deny_for("registry.k8s.io:8443/pause:3.9")) == 1
}

test_organisation_prefix_trick_is_denied if {
	count(deny_for("ghcr.io/acme-evil/web:1")) == 1
	count(deny_for("ghcr.io/acmecorp/web:1")) == 1
	count(deny_for("ghcr.io/acme:1")) == 1
}

test_path_traversal_is_denied_as_invalid if {
	deny_for("ghcr.io/acme/../evil/web:1") == {`container "bad" (spec.containers[0]) has image "ghcr.io/acme/../evil/web:1", which is not a valid image reference: use registry/repository[:tag][@digest] from an allowed registry (ghcr.io/acme/, registry.k8s.io/)`}
}

test_registry_host_is_case_insensitive if {
	count(deny_for("REGISTRY.K8S.IO/pause:3.9")) == 0
}

test_digest_pinned_image_is_allowed if {
	count(deny_for("ghcr.io/acme/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")) == 0
}

test_init_container_is_checked if {
	spec := with_image("initContainers", "docker.io/library/busybox:1.36")
	deny := allowed_registries.deny with input as fixtures.create(fixtures.deployment(spec))
	count(deny) == 1
	some msg in deny
	contains(msg, `container "bad" (spec.template.spec.initContainers[0]) uses image "docker.io/library/busybox:1.36"`)
}

test_ephemeral_container_is_checked if {
	pod := fixtures.pod(good_spec)
	debugged := object.union(pod, {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox:1.36", "targetContainerName": "web"}]}})
	request := json.patch(fixtures.update(debugged, pod), [{"op": "replace", "path": "/request/resource/resource", "value": "pods"}, {"op": "add", "path": "/request/subResource", "value": "ephemeralcontainers"}])
	some msg in allowed_registries.deny with input as request
	contains(msg, `container "debugger" (spec.ephemeralContainers[0])`)
}

test_cronjob_containers_are_checked if {
	cronjob := fixtures.cronjob(with_image("containers", "quay.io/acme/tick:1"))
	some msg in allowed_registries.deny with input as fixtures.create(cronjob)
	contains(msg, "spec.jobTemplate.spec.template.spec.containers[0]")
}

test_every_bad_container_is_reported if {
	spec := {
		"initContainers": [{"name": "a", "image": "nginx"}],
		"containers": [{"name": "b", "image": "ghcr.io/acme/ok:1"}, {"name": "c", "image": "quay.io/x/y:1"}],
	}
	count(allowed_registries.deny) == 2 with input as fixtures.create(fixtures.statefulset(spec))
}

test_registries_come_from_params if {
	registries := ["docker.io/library/", "quay.io"]
	count(deny_for("nginx:1.25")) == 0 with data.params.allowed_registries.registries as registries
	count(deny_for("quay.io/org/app:1")) == 0 with data.params.allowed_registries.registries as registries
	count(deny_for("quay.io.evil.net/org/app:1")) == 1 with data.params.allowed_registries.registries as registries
	count(deny_for("docker.io/bitnami/redis:7")) == 1 with data.params.allowed_registries.registries as registries
	count(deny_for("ghcr.io/acme/web:2")) == 1 with data.params.allowed_registries.registries as registries
}

test_repository_entry_matches_only_that_repository if {
	registries := ["ghcr.io/acme/web"]
	count(deny_for("ghcr.io/acme/web:2")) == 0 with data.params.allowed_registries.registries as registries
	count(deny_for("ghcr.io/acme/web/sub:2")) == 0 with data.params.allowed_registries.registries as registries
	count(deny_for("ghcr.io/acme/webhook:2")) == 1 with data.params.allowed_registries.registries as registries
}

test_index_docker_io_is_docker_hub if {
	count(deny_for("index.docker.io/library/nginx:1.25")) == 0 with data.params.allowed_registries.registries as ["docker.io/library/"]
}

test_empty_allow_list_denies_everything if {
	count(deny_for("ghcr.io/acme/web:2")) == 1 with data.params.allowed_registries.registries as []
}

test_missing_image_is_denied if {
	pod := fixtures.pod({"containers": [{"name": "noimage"}]})
	allowed_registries.deny == {`container "noimage" (spec.containers[0]) has no image: set spec.containers[0].image to an image from an allowed registry (ghcr.io/acme/, registry.k8s.io/)`} with input as fixtures.create(pod)
}

test_require_digest if {
	deny := deny_for("ghcr.io/acme/web:2") with data.params.allowed_registries.require_digest as true
	deny == {`container "bad" (spec.containers[0]) uses image "ghcr.io/acme/web:2" without a digest: pin it as ghcr.io/acme/web@sha256:<digest>`}
	count(deny_for("ghcr.io/acme/web@sha256:abcdef0123456789")) == 0 with data.params.allowed_registries.require_digest as true
}

test_latest_and_untagged_images_warn if {
	warn_latest := allowed_registries.warn with input as fixtures.create(fixtures.pod(with_image("containers", "ghcr.io/acme/web:latest")))
	warn_latest == {`container "bad" (spec.containers[0]) uses image "ghcr.io/acme/web:latest", which floats with the latest tag: pin a version tag or a digest`}
	warn_untagged := allowed_registries.warn with input as fixtures.create(fixtures.pod(with_image("containers", "ghcr.io/acme/web")))
	count(warn_untagged) == 1
}

test_digest_silences_latest_warning if {
	image := "ghcr.io/acme/web:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	count(allowed_registries.warn) == 0 with input as fixtures.create(fixtures.pod(with_image("containers", image)))
}

test_delete_is_not_reviewed if {
	pod := fixtures.pod(with_image("containers", "nginx"))
	count(allowed_registries.deny) == 0 with input as fixtures.delete(pod)
}

test_objects_without_pods_are_ignored if {
	count(allowed_registries.deny) == 0 with input as fixtures.create(fixtures.configmap)
}

test_match_covers_ephemeral_containers_subresource if {
	some rule in allowed_registries.match.rules
	"pods/ephemeralcontainers" in rule.resources
}
