package controllers.temporary_access_test

import data.controllers.temporary_access
import future.keywords.if

parent = {
	"apiVersion": "access.example.com/v1",
	"kind": "TemporaryAccess",
	"metadata": {"name": "alice-oncall", "namespace": "prod"},
	"spec": {
		"user": "alice",
		"role": "edit",
		"validFrom": "2030-01-01T10:00:00Z",
		"validUntil": "2030-01-01T12:00:00Z",
	},
}

request(bindings) = {
	"controller": {},
	"parent": parent,
	"children": {"RoleBinding.rbac.authorization.k8s.io/v1": bindings},
	"related": {},
	"finalizing": false,
}

before = 1893483000000000000 # 2030-01-01T07:30:00Z

during = 1893495600000000000 # 2030-01-01T11:00:00Z

after = 1893502800000000000 # 2030-01-01T13:00:00Z

test_no_binding_before_the_window if {
	count(temporary_access.children) == 0 with input as request({}) with temporary_access.now_ns as before
	temporary_access.status == {"phase": "Pending", "bindings": 0} with input as request({}) with temporary_access.now_ns as before
}

test_binding_inside_the_window if {
	[b] := [b | b := temporary_access.children[_]] with input as request({}) with temporary_access.now_ns as during
	b.metadata.name == "alice-oncall"
	b.roleRef == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
	b.subjects == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]
}

test_no_binding_after_the_window if {
	count(temporary_access.children) == 0 with input as request({"alice-oncall": {}}) with temporary_access.now_ns as after
	temporary_access.status == {"phase": "Expired", "bindings": 1} with input as request({"alice-oncall": {}}) with temporary_access.now_ns as after
}

test_resync_at_the_next_boundary if {
	temporary_access.resyncAfterSeconds == 9000.05 with input as request({}) with temporary_access.now_ns as before
	temporary_access.resyncAfterSeconds == 3600.05 with input as request({}) with temporary_access.now_ns as during
	not temporary_access.resyncAfterSeconds with input as request({}) with temporary_access.now_ns as after
}

test_role_defaults_to_view if {
	p := {
		"metadata": parent.metadata,
		"spec": {"user": "alice", "validFrom": "2030-01-01T10:00:00Z", "validUntil": "2030-01-01T12:00:00Z"},
	}
	req := {"controller": {}, "parent": p, "children": {}, "related": {}, "finalizing": false}
	[b] := [b | b := temporary_access.children[_]] with input as req with temporary_access.now_ns as during
	b.roleRef.name == "view"
}
