# Time-bounded access, in the style of the Metacontroller + OPA examples
# (Rego v0, served by OPA's /v0/data API, so `input` is the hook request):
# a TemporaryAccess grants spec.user the ClusterRole spec.role in its
# namespace, through a RoleBinding that exists only while
# spec.validFrom <= now < spec.validUntil.
#
# Rego v0 with the future keywords OPA 0.x examples use, so the module also
# parses as Rego v1 (the policies/ library is tested as v1): load it with
# --v0-compatible (regokite test/controller) or OPA 0.x, or as v1.
package controllers.temporary_access

import future.keywords.contains
import future.keywords.if

# Nanoseconds since the epoch; a rule so tests can pin the clock. The CRD
# requires both bounds as RFC 3339 date-times.
now_ns = time.now_ns()

valid_from_ns = time.parse_rfc3339_ns(input.parent.spec.validFrom)

valid_until_ns = time.parse_rfc3339_ns(input.parent.spec.validUntil)

phase = "Pending" if {
	now_ns < valid_from_ns
}

phase = "Active" if {
	now_ns >= valid_from_ns
	now_ns < valid_until_ns
}

phase = "Expired" if {
	now_ns >= valid_until_ns
}

default role = "view"

role = input.parent.spec.role if {
	is_string(input.parent.spec.role)
}

children contains binding if {
	phase == "Active"
	binding := {
		"apiVersion": "rbac.authorization.k8s.io/v1",
		"kind": "RoleBinding",
		"metadata": {
			"name": input.parent.metadata.name,
			"labels": {"access.example.com/user": input.parent.spec.user},
		},
		"roleRef": {
			"apiGroup": "rbac.authorization.k8s.io",
			"kind": "ClusterRole",
			"name": role,
		},
		"subjects": [{
			"apiGroup": "rbac.authorization.k8s.io",
			"kind": "User",
			"name": input.parent.spec.user,
		}],
	}
}

bindings = object.get(input, ["children", "RoleBinding.rbac.authorization.k8s.io/v1"], {})

status = {"phase": phase, "bindings": count(bindings)}

# Wake up at the next boundary instead of waiting for the periodic resync.
resyncAfterSeconds = seconds_until(valid_from_ns) if {
	phase == "Pending"
}

resyncAfterSeconds = seconds_until(valid_until_ns) if {
	phase == "Active"
}

# 50 ms after the boundary, computed in whole milliseconds: nanoseconds over
# 10^9, or a fraction added to a large number, can take more digits than the
# embedded engine's numbers hold (an evaluation error there).
seconds_until(t) := (ms + 50) / 1000 if {
	ns := t - now_ns
	ms := (ns - (ns % 1000000)) / 1000000
}
