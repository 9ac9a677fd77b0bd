package admission.no_privileged_test

import data.admission.no_privileged
import data.lib.fixtures

restricted := {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}

safe_spec := {
	"securityContext": {"runAsNonRoot": true},
	"initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1", "securityContext": restricted}],
	"containers": [{"name": "web", "image": "ghcr.io/acme/web:1", "securityContext": restricted}],
}

# with_container(spec, field, c) adds container c to the list at field.
with_container(spec, field, c) := object.union(spec, {field: array.concat(object.get(spec, field, []), [c])})

container(security_context) := {"name": "bad", "image": "ghcr.io/acme/bad:1", "securityContext": security_context}

deny_for(spec) := deny if {
	deny := no_privileged.deny with input as fixtures.create(fixtures.pod(spec))
}

warn_for(spec) := warn if {
	warn := no_privileged.warn with input as fixtures.create(fixtures.pod(spec))
}

test_restricted_workloads_are_allowed if {
	every w in fixtures.workloads(safe_spec) {
		count(no_privileged.deny) == 0 with input as fixtures.create(w)
		count(no_privileged.warn) == 0 with input as fixtures.create(w)
	}
}

test_privileged_container_is_denied if {
	deny_for(with_container(safe_spec, "containers", container({"privileged": true}))) == {`container "bad" (spec.containers[1]) runs privileged: remove spec.containers[1].securityContext.privileged or set it to false`}
}

test_privileged_false_is_allowed if {
	count(deny_for(with_container(safe_spec, "containers", container({"privileged": false, "runAsNonRoot": true})))) == 0
}

test_privileged_init_container_in_every_workload_is_denied if {
	spec := with_container(safe_spec, "initContainers", container({"privileged": true, "runAsNonRoot": true}))
	every w in fixtures.workloads(spec) {
		some msg in no_privileged.deny with input as fixtures.create(w)
		contains(msg, "initContainers[1]) runs privileged")
	}
}

test_privileged_container_in_cronjob_names_full_path if {
	cronjob := fixtures.cronjob(with_container(safe_spec, "containers", container({"privileged": true})))
	some msg in no_privileged.deny with input as fixtures.create(cronjob)
	contains(msg, `container "bad" (spec.jobTemplate.spec.template.spec.containers[1]) runs privileged`)
}

test_privileged_ephemeral_container_is_denied if {
	pod := fixtures.pod(safe_spec)
	debug := object.union(pod, {"spec": {"ephemeralContainers": [container({"privileged": true})]}})
	some msg in no_privileged.deny with input as fixtures.update(debug, pod)
	contains(msg, `container "bad" (spec.ephemeralContainers[0]) runs privileged`)
}

test_privilege_escalation_is_denied if {
	deny_for(with_container(safe_spec, "containers", container({"allowPrivilegeEscalation": true, "runAsNonRoot": true}))) == {`container "bad" (spec.containers[1]) allows privilege escalation: set spec.containers[1].securityContext.allowPrivilegeEscalation to false`}
}

test_host_namespaces_are_denied if {
	spec := object.union(safe_spec, {"hostNetwork": true, "hostPID": true, "hostIPC": true})
	deny := no_privileged.deny with input as fixtures.create(fixtures.deployment(spec))
	deny == {
		`Deployment "web-deployment" uses the host network (spec.template.spec.hostNetwork: true): remove spec.template.spec.hostNetwork or set it to false`,
		`Deployment "web-deployment" uses the host PID namespace (spec.template.spec.hostPID: true): remove spec.template.spec.hostPID or set it to false`,
		`Deployment "web-deployment" uses the host IPC namespace (spec.template.spec.hostIPC: true): remove spec.template.spec.hostIPC or set it to false`,
	}
}

test_host_namespaces_false_are_allowed if {
	spec := object.union(safe_spec, {"hostNetwork": false, "hostPID": false, "hostIPC": false})
	count(deny_for(spec)) == 0
}

test_host_network_in_daemonset_is_denied if {
	daemonset := fixtures.daemonset(object.union(safe_spec, {"hostNetwork": true}))
	count(no_privileged.deny) == 1 with input as fixtures.create(daemonset)
}

test_forbidden_capabilities_are_denied if {
	c := container({"runAsNonRoot": true, "capabilities": {"add": ["NET_BIND_SERVICE", "CAP_SYS_ADMIN", "all"]}})
	deny_for(with_container(safe_spec, "containers", c)) == {
		`container "bad" (spec.containers[1]) adds capability CAP_SYS_ADMIN: remove it from spec.containers[1].securityContext.capabilities.add`,
		`container "bad" (spec.containers[1]) adds capability all: remove it from spec.containers[1].securityContext.capabilities.add`,
	}
}

test_forbidden_capabilities_come_from_params if {
	c := container({"runAsNonRoot": true, "capabilities": {"add": ["NET_RAW"]}})
	spec := with_container(safe_spec, "containers", c)
	count(deny_for(spec)) == 0
	count(deny_for(spec)) == 1 with data.params.no_privileged.forbidden_capabilities as ["NET_RAW"]
}

test_windows_host_process_is_denied if {
	pod_level := object.union(safe_spec, {"securityContext": {"windowsOptions": {"hostProcess": true}}})
	some msg in deny_for(pod_level)
	contains(msg, "spec.securityContext.windowsOptions.hostProcess: true")
	c := container({"runAsNonRoot": true, "windowsOptions": {"hostProcess": true}})
	count(deny_for(with_container(safe_spec, "containers", c))) == 1
}

test_all_problems_are_reported_together if {
	c := container({"privileged": true, "allowPrivilegeEscalation": true, "capabilities": {"add": ["SYS_ADMIN"]}})
	spec := object.union(with_container(safe_spec, "containers", c), {"hostPID": true})
	count(deny_for(spec)) == 4
}

test_missing_security_context_only_warns if {
	spec := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}
	count(deny_for(spec)) == 0
	warn_for(spec) == {`container "web" (spec.containers[0]) may run as root: set securityContext.runAsNonRoot: true (on the container or the pod) or a non-zero runAsUser`}
}

test_pod_level_run_as_non_root_silences_warning if {
	spec := {"securityContext": {"runAsNonRoot": true}, "containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}
	count(warn_for(spec)) == 0
}

test_container_can_override_pod_run_as_non_root if {
	spec := {
		"securityContext": {"runAsNonRoot": true},
		"containers": [{"name": "web", "image": "ghcr.io/acme/web:1", "securityContext": {"runAsNonRoot": false}}],
	}
	count(warn_for(spec)) == 1
}

test_non_zero_run_as_user_silences_warning if {
	count(warn_for({"securityContext": {"runAsUser": 1000}, "containers": [{"name": "web", "image": "x"}]})) == 0
	count(warn_for({"containers": [{"name": "web", "image": "x", "securityContext": {"runAsUser": 0}}]})) == 1
	count(warn_for({"securityContext": {"runAsUser": 1000}, "containers": [{"name": "web", "image": "x", "securityContext": {"runAsUser": 0}}]})) == 1
}

test_init_and_ephemeral_containers_warn_too if {
	spec := {
		"initContainers": [{"name": "init", "image": "x"}],
		"containers": [{"name": "web", "image": "x", "securityContext": {"runAsNonRoot": true}}],
		"ephemeralContainers": [{"name": "debug", "image": "x"}],
	}
	count(warn_for(spec)) == 2
}

test_delete_is_not_reviewed if {
	pod := fixtures.pod(with_container(safe_spec, "containers", container({"privileged": true})))
	count(no_privileged.deny) == 0 with input as fixtures.delete(pod)
	count(no_privileged.warn) == 0 with input as fixtures.delete(pod)
}

test_objects_without_pods_are_ignored if {
	count(no_privileged.deny) == 0 with input as fixtures.create(fixtures.configmap)
}

test_match_skips_namespaces_that_opt_out if {
	some expression in no_privileged.match.namespaceSelector.matchExpressions
	expression == {"key": "regokite.io/privileged", "operator": "NotIn", "values": ["allowed"]}
}
