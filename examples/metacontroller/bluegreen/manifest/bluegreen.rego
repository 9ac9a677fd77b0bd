# Metacontroller's bluegreen example (sync.js) as a Rego sync hook.
#
# A BlueGreenDeployment has a Service and two ReplicaSets, <name>-blue and
# <name>-green; the Service selects the active color. A new Pod template is
# rolled out on the inactive ReplicaSet, and the colors swap once all its
# replicas are available; then the old one scales down to zero. Each
# ReplicaSet records the template it runs in an annotation.
package examples.metacontroller.bluegreen

template_annotation := "bluegreendeployments.ctl.enisoc.com/pod-template-json"

bgd := input.parent

replica_sets := input.children["ReplicaSet.apps/v1"]

# Status from what is observed: the color the Service selects (blue without
# a Service; sync.js would leave it undefined for a Service without a color,
# which this hook never writes), and the status of the active and inactive
# ReplicaSets.
service := input.children["Service.v1"][bgd.spec.service.metadata.name]

default observed_color := "blue"

observed_color := service.spec.selector.color

other_color(color) := "green" if color == "blue"

other_color(color) := "blue" if color != "blue"

replica_set(color) := replica_sets[sprintf("%s-%s", [bgd.metadata.name, color])]

active_rs := replica_set(observed_color)

inactive_rs := replica_set(other_color(observed_color))

# sync.js: `activeRS ? activeRS.status : {}` (a ReplicaSet without status leaves the field out).
status := object.union(
	{"activeColor": observed_color},
	object.union(rs_status("active", observed_color), rs_status("inactive", other_color(observed_color))),
)

rs_status(field, color) := {field: s | s := replica_set(color).status} if replica_set(color)

rs_status(field, color) := {field: {}} if not replica_set(color)

# The template a ReplicaSet runs, from its annotation.
template_of(rs) := json.unmarshal(rs.metadata.annotations[template_annotation])

up_to_date(rs) if template_of(rs) == bgd.spec.template

# Where the rollout stands, before this sync's step.
current := {
	"active_replicas": active_replicas,
	"active_template": active_template,
	"inactive_replicas": inactive_replicas,
	"inactive_template": inactive_template,
}

active_replicas := active_rs.spec.replicas if {
	active_rs
} else := bgd.spec.replicas

active_template := template_of(active_rs) if {
	active_rs
} else := bgd.spec.template

inactive_replicas := inactive_rs.spec.replicas if {
	inactive_rs
} else := 0

inactive_template := template_of(inactive_rs) if {
	inactive_rs
} else := bgd.spec.template

# The next step.
next := object.union(current, {"color": observed_color, "inactive_replicas": 0}) if {
	# The active ReplicaSet runs the current template: scale the inactive one down.
	up_to_date(active_rs)
} else := {
	# The inactive one runs it, scaled up and all available: swap the colors.
	"color": inactive_rs.metadata.labels.color,
	"active_replicas": bgd.spec.replicas,
	"active_template": inactive_template,
	"inactive_replicas": active_replicas,
	"inactive_template": active_template,
} if {
	up_to_date(inactive_rs)
	inactive_rs.status.availableReplicas == bgd.spec.replicas
} else := object.union(current, {"color": observed_color, "inactive_replicas": bgd.spec.replicas}) if {
	# The inactive one runs it: scale it up.
	up_to_date(inactive_rs)
} else := object.union(current, {
	"color": observed_color,
	"inactive_replicas": bgd.spec.replicas,
	"inactive_template": bgd.spec.template,
}) if {
	# Neither does, and the inactive one is scaled down: start a rollout on it.
	inactive_rs.spec.replicas == 0
	inactive_rs.status.replicas == 0
} else := object.union(current, {"color": observed_color, "inactive_replicas": 0})

# (Otherwise another rollout was in progress: cancel it and wait.)

children := [
	new_service(next.color),
	new_replica_set(next.color, next.active_replicas, next.active_template),
	new_replica_set(other_color(next.color), next.inactive_replicas, next.inactive_template),
]

new_service(color) := object.union(bgd.spec.service, {
	"apiVersion": "v1",
	"kind": "Service",
	"spec": {"selector": {"color": color}},
})

new_replica_set(color, replicas, template) := {
	"apiVersion": "apps/v1",
	"kind": "ReplicaSet",
	"metadata": {
		"name": sprintf("%s-%s", [bgd.metadata.name, color]),
		"labels": object.union(template.metadata.labels, {"color": color}),
		"annotations": {template_annotation: json.marshal(template)},
	},
	"spec": object.union(min_ready_seconds, {
		"replicas": replicas,
		"selector": object.union(bgd.spec.selector, {"matchLabels": {"color": color}}),
		"template": object.union(template, {"metadata": {"labels": {"color": color}}}),
	}),
}

# Left out when the parent has none, as JSON.stringify leaves out undefined.
min_ready_seconds := {"minReadySeconds": s | s := bgd.spec.minReadySeconds}
