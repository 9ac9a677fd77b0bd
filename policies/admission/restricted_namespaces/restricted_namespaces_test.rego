package admission.restricted_namespaces_test

import data.admission.restricted_namespaces
import data.lib.fixtures

namespaces := {
	"shop": {"metadata": {"name": "shop", "labels": {"regokite.io/tier": "restricted"}}},
	"lab": {"metadata": {"name": "lab", "labels": {"regokite.io/tier": "open"}}},
}

hardened := {"containers": [{
	"name": "web",
	"image": "ghcr.io/acme/web:1",
	"securityContext": {"readOnlyRootFilesystem": true, "runAsNonRoot": true},
}]}

plain := {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1"}]}

in_namespace(o, ns) := json.patch(o, [{"op": "replace", "path": "/metadata/namespace", "value": ns}])

test_a_plain_deployment_in_a_restricted_namespace_is_denied_twice if {
	denials := restricted_namespaces.deny with input as fixtures.create(fixtures.deployment(plain))
		with data.kubernetes.namespaces as namespaces
	denials == {
		`container "web" (spec.template.spec.containers[0]) in restricted namespace shop must set securityContext.readOnlyRootFilesystem: true`,
		`container "web" (spec.template.spec.containers[0]) in restricted namespace shop must run as non-root: set securityContext.runAsNonRoot: true`,
	}
}

test_a_hardened_pod_is_allowed if {
	count(restricted_namespaces.deny) == 0 with input as fixtures.create(fixtures.pod(hardened))
		with data.kubernetes.namespaces as namespaces
}

test_run_as_non_root_may_come_from_the_pod if {
	spec := {
		"securityContext": {"runAsNonRoot": true},
		"containers": [{"name": "web", "securityContext": {"readOnlyRootFilesystem": true}}],
	}
	count(restricted_namespaces.deny) == 0 with input as fixtures.create(fixtures.pod(spec))
		with data.kubernetes.namespaces as namespaces
}

test_a_container_may_not_undo_the_pods_non_root if {
	spec := {
		"securityContext": {"runAsNonRoot": true},
		"containers": [{"name": "web", "securityContext": {"readOnlyRootFilesystem": true, "runAsNonRoot": false}}],
	}
	count(restricted_namespaces.deny) == 1 with input as fixtures.create(fixtures.pod(spec))
		with data.kubernetes.namespaces as namespaces
}

test_other_namespaces_are_not_reviewed if {
	count(restricted_namespaces.deny) == 0 with input as fixtures.create(in_namespace(fixtures.pod(plain), "lab"))
		with data.kubernetes.namespaces as namespaces
	count(restricted_namespaces.deny) == 0 with input as fixtures.create(in_namespace(fixtures.pod(plain), "new"))
		with data.kubernetes.namespaces as namespaces
}
