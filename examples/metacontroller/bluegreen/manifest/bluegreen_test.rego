package examples.metacontroller.bluegreen_test

import data.examples.metacontroller.bluegreen

annotation := "bluegreendeployments.ctl.enisoc.com/pod-template-json"

template(labels) := {
	"metadata": {"labels": labels},
	"spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
}

old_template := template({"app": "nginx"})

new_template := template({"app": "nginx", "new": "label"})

bgd(tmpl) := {
	"apiVersion": "ctl.enisoc.com/v1",
	"kind": "BlueGreenDeployment",
	"metadata": {"name": "nginx"},
	"spec": {
		"replicas": 3,
		"minReadySeconds": 5,
		"selector": {"matchLabels": {"app": "nginx"}},
		"template": tmpl,
		"service": {
			"metadata": {"name": "nginx-frontend", "labels": {"app": "nginx"}},
			"spec": {"selector": {"app": "nginx"}, "ports": [{"port": 80}]},
		},
	},
}

rs(color, tmpl, replicas, status) := {
	"metadata": {
		"name": sprintf("nginx-%s", [color]),
		"labels": {"color": color},
		"annotations": {annotation: json.marshal(tmpl)},
	},
	"spec": {"replicas": replicas},
	"status": status,
}

service(color) := {"nginx-frontend": {"spec": {"selector": {"app": "nginx", "color": color}}}}

sync(tmpl, services, replica_sets) := {
	"controller": {},
	"parent": bgd(tmpl),
	"children": {"Service.v1": services, "ReplicaSet.apps/v1": {r.metadata.name: r | some r in replica_sets}},
	"related": {},
	"finalizing": false,
}

# [service color, [name, replicas, template], [name, replicas, template]]
shape(children) := [
	children[0].spec.selector.color,
	[children[1].metadata.name, children[1].spec.replicas, json.unmarshal(children[1].metadata.annotations[annotation])],
	[children[2].metadata.name, children[2].spec.replicas, json.unmarshal(children[2].metadata.annotations[annotation])],
]

test_first_sync_blue_active_green_empty if {
	children := bluegreen.children with input as sync(old_template, {}, [])
	shape(children) == ["blue", ["nginx-blue", 3, old_template], ["nginx-green", 0, old_template]]
	bluegreen.status == {"activeColor": "blue", "active": {}, "inactive": {}} with input as sync(old_template, {}, [])
}

test_children_shapes if {
	children := bluegreen.children with input as sync(old_template, {}, [])
	children[0] == {
		"apiVersion": "v1",
		"kind": "Service",
		"metadata": {"name": "nginx-frontend", "labels": {"app": "nginx"}},
		"spec": {"selector": {"app": "nginx", "color": "blue"}, "ports": [{"port": 80}]},
	}
	children[1] == {
		"apiVersion": "apps/v1",
		"kind": "ReplicaSet",
		"metadata": {
			"name": "nginx-blue",
			"labels": {"app": "nginx", "color": "blue"},
			"annotations": {annotation: json.marshal(old_template)},
		},
		"spec": {
			"replicas": 3,
			"minReadySeconds": 5,
			"selector": {"matchLabels": {"app": "nginx", "color": "blue"}},
			"template": template({"app": "nginx", "color": "blue"}),
		},
	}
}

test_no_min_ready_seconds_when_the_parent_has_none if {
	input_ := json.remove(sync(old_template, {}, []), ["parent/spec/minReadySeconds"])
	children := bluegreen.children with input as input_
	not children[1].spec.minReadySeconds
}

test_status_reports_observed_replica_sets if {
	blue := rs("blue", old_template, 3, {"replicas": 3, "availableReplicas": 3})
	green := rs("green", old_template, 0, {"replicas": 0})
	bluegreen.status == {
		"activeColor": "blue",
		"active": {"replicas": 3, "availableReplicas": 3},
		"inactive": {"replicas": 0},
	} with input as sync(old_template, service("blue"), [blue, green])
}

test_a_new_template_starts_a_rollout_on_the_scaled_down_inactive_set if {
	blue := rs("blue", old_template, 3, {"replicas": 3})
	green := rs("green", old_template, 0, {"replicas": 0})
	children := bluegreen.children with input as sync(new_template, service("blue"), [blue, green])
	shape(children) == ["blue", ["nginx-blue", 3, old_template], ["nginx-green", 3, new_template]]
}

test_the_inactive_set_scales_up_until_available if {
	blue := rs("blue", old_template, 3, {"replicas": 3})
	green := rs("green", new_template, 3, {"replicas": 3, "availableReplicas": 2})
	children := bluegreen.children with input as sync(new_template, service("blue"), [blue, green])
	shape(children) == ["blue", ["nginx-blue", 3, old_template], ["nginx-green", 3, new_template]]
}

test_colors_swap_once_the_inactive_set_is_available if {
	blue := rs("blue", old_template, 3, {"replicas": 3})
	green := rs("green", new_template, 3, {"replicas": 3, "availableReplicas": 3})
	children := bluegreen.children with input as sync(new_template, service("blue"), [blue, green])
	shape(children) == ["green", ["nginx-green", 3, new_template], ["nginx-blue", 3, old_template]]
	bluegreen.status.activeColor == "blue" with input as sync(new_template, service("blue"), [blue, green])
}

test_the_old_set_scales_down_after_the_swap if {
	blue := rs("blue", old_template, 3, {"replicas": 3})
	green := rs("green", new_template, 3, {"replicas": 3, "availableReplicas": 3})
	children := bluegreen.children with input as sync(new_template, service("green"), [blue, green])
	shape(children) == ["green", ["nginx-green", 3, new_template], ["nginx-blue", 0, old_template]]
	bluegreen.status.activeColor == "green" with input as sync(new_template, service("green"), [blue, green])
}

test_another_rollout_in_progress_is_cancelled_first if {
	third := template({"app": "nginx", "new2": "label2"})
	blue := rs("blue", old_template, 3, {"replicas": 3})
	green := rs("green", new_template, 3, {"replicas": 2})
	children := bluegreen.children with input as sync(third, service("blue"), [blue, green])
	shape(children) == ["blue", ["nginx-blue", 3, old_template], ["nginx-green", 0, new_template]]
}
