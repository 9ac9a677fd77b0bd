package admission.resource_limits_test

import data.admission.resource_limits
import data.lib.fixtures

sized := {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}

good_spec := {
	"initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1", "resources": sized}],
	"containers": [{"name": "web", "image": "ghcr.io/acme/web:1", "resources": sized}],
}

one(resources) := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1", "resources": resources}]}

deny_for(spec) := deny if {
	deny := resource_limits.deny with input as fixtures.create(fixtures.pod(spec))
}

warn_for(spec) := warn if {
	warn := resource_limits.warn with input as fixtures.create(fixtures.pod(spec))
}

test_sized_workloads_are_allowed if {
	every w in fixtures.workloads(good_spec) {
		count(resource_limits.deny) == 0 with input as fixtures.create(w)
		count(resource_limits.warn) == 0 with input as fixtures.create(w)
	}
}

test_container_without_resources_is_denied if {
	deny_for({"containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}) == {`container "web" (spec.containers[0]) has no cpu or memory limit: set spec.containers[0].resources.limits.cpu, spec.containers[0].resources.limits.memory`}
}

test_missing_memory_limit_is_denied if {
	deny_for(one({"limits": {"cpu": "1"}, "requests": {"cpu": "1", "memory": "1Gi"}})) == {`container "web" (spec.containers[0]) has no memory limit: set spec.containers[0].resources.limits.memory`}
}

test_missing_cpu_limit_is_denied if {
	deny_for(one({"limits": {"memory": "1Gi"}})) == {`container "web" (spec.containers[0]) has no cpu limit: set spec.containers[0].resources.limits.cpu`}
}

test_null_limit_counts_as_missing if {
	count(deny_for(one({"limits": {"cpu": null, "memory": "1Gi"}}))) == 1
}

test_numeric_quantities_are_accepted if {
	count(deny_for(one({"limits": {"cpu": 2, "memory": 1073741824}, "requests": {"cpu": 1, "memory": 536870912}}))) == 0
}

test_init_container_without_limits_is_denied_in_every_workload if {
	spec := object.union(good_spec, {"initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1"}]})
	every w in fixtures.workloads(spec) {
		deny := resource_limits.deny with input as fixtures.create(w)
		count(deny) == 1
		some msg in deny
		contains(msg, `container "migrate" (`)
		contains(msg, "initContainers[0]) has no cpu or memory limit")
	}
}

test_cronjob_path_is_named if {
	cronjob := fixtures.cronjob(one({}))
	some msg in resource_limits.deny with input as fixtures.create(cronjob)
	contains(msg, "set spec.jobTemplate.spec.template.spec.containers[0].resources.limits.cpu")
}

test_each_container_is_reported if {
	spec := {"containers": [
		{"name": "a", "image": "x", "resources": sized},
		{"name": "b", "image": "x"},
		{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}}},
	]}
	deny := deny_for(spec)
	count(deny) == 2
	some msg in deny
	startswith(msg, `container "c" (spec.containers[2]) has no memory limit`)
}

test_ephemeral_containers_are_not_checked if {
	pod := fixtures.pod(good_spec)
	debug := object.union(pod, {"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox:1.36"}]}})
	count(resource_limits.deny) == 0 with input as fixtures.update(debug, pod)
}

test_missing_requests_only_warn if {
	spec := one({"limits": {"cpu": "1", "memory": "1Gi"}})
	count(deny_for(spec)) == 0
	warn_for(spec) == {`container "web" (spec.containers[0]) has no cpu or memory request, so Kubernetes requests the full limit: set spec.containers[0].resources.requests.cpu, spec.containers[0].resources.requests.memory`}
}

test_partial_requests_warn_about_the_missing_one if {
	warn_for(one({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}})) == {`container "web" (spec.containers[0]) has no memory request, so Kubernetes requests the full limit: set spec.containers[0].resources.requests.memory`}
}

test_no_request_warning_without_limit if {
	count(warn_for(one({}))) == 0
}

test_required_resources_come_from_params if {
	spec := one({"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}})
	count(deny_for(spec)) == 1
	count(deny_for(spec)) == 0 with data.params.resource_limits.resources as ["memory"]
	deny := deny_for(spec) with data.params.resource_limits.resources as ["memory", "ephemeral-storage"]
	deny == {`container "web" (spec.containers[0]) has no ephemeral-storage limit: set spec.containers[0].resources.limits.ephemeral-storage`}
}

test_limits_above_maximum_are_denied if {
	spec := one({"limits": {"cpu": "8", "memory": "16Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
	count(deny_for(spec)) == 0
	deny := deny_for(spec) with data.params.resource_limits.max_limits as {"cpu": "4", "memory": "8Gi"}
	deny == {
		`container "web" (spec.containers[0]) sets limits.cpu to 8, above the maximum of 4: lower spec.containers[0].resources.limits.cpu`,
		`container "web" (spec.containers[0]) sets limits.memory to 16Gi, above the maximum of 8Gi: lower spec.containers[0].resources.limits.memory`,
	}
}

test_limits_at_or_below_maximum_are_allowed if {
	spec := one({"limits": {"cpu": "4000m", "memory": "8192Mi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
	count(deny_for(spec)) == 0 with data.params.resource_limits.max_limits as {"cpu": "4", "memory": "8Gi"}
	small := one({"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}})
	count(deny_for(small)) == 0 with data.params.resource_limits.max_limits as {"cpu": "4", "memory": "8Gi"}
}

test_unreadable_quantity_is_not_compared if {
	spec := one({"limits": {"cpu": "100n", "memory": "1Gi"}, "requests": {"cpu": "100n", "memory": "1Gi"}})
	count(deny_for(spec)) == 0 with data.params.resource_limits.max_limits as {"cpu": "4"}
}

test_delete_is_not_reviewed if {
	count(resource_limits.deny) == 0 with input as fixtures.delete(fixtures.pod(one({})))
}

test_objects_without_pods_are_ignored if {
	count(resource_limits.deny) == 0 with input as fixtures.create(fixtures.configmap)
}
