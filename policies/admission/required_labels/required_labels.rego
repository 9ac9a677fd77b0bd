# Objects must carry the labels that ownership, cost reports and dashboards
# rely on. Workloads must also carry them on their pod template, so the pods
# they create are labelled too.
#
# Parameters (data.params.required_labels):
#   labels          label keys that must be present with a non-empty value
#   patterns        {label key: regex} a present value must match
#   check_templates false to skip the pod template check
#
# On UPDATE, a problem the old object already had is only warned about, so
# objects created before the policy can still be scaled or edited; an update
# that removes a required label, or breaks its value, is denied.
package admission.required_labels

import data.lib.kubernetes

match := {
	"rules": [
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": [""],
			"apiVersions": ["v1"],
			"resources": ["pods", "services", "replicationcontrollers"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["apps"],
			"apiVersions": ["v1"],
			"resources": ["deployments", "replicasets", "statefulsets", "daemonsets"],
		},
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": ["batch"],
			"apiVersions": ["v1"],
			"resources": ["jobs", "cronjobs"],
		},
	],
	"excludedNamespaces": ["kube-system", "kube-public", "kube-node-lease"],
}

enforcement := "deny"

failure_policy := "Fail"

default required := ["app.kubernetes.io/name", "owner"]

required := data.params.required_labels.labels

default patterns := {}

patterns := data.params.required_labels.patterns

default check_templates := true

check_templates := data.params.required_labels.check_templates

obj := input.request.object

reviewed if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
	not obj.metadata.deletionTimestamp
}

# label_places(o) maps each place that must be labelled to the labels there.
label_places(o) := object.union({"metadata.labels": kubernetes.labels(o)}, template_place(o))

template_place(o) := {path: object.get(template, "labels", {})} if {
	check_templates == true
	template := kubernetes.pod_template_metadata(o)
	path := concat(".", [trim_suffix(kubernetes.pod_spec_path(o), ".spec"), "metadata.labels"])
} else := {}

has_value(labels, key) if labels[key] != ""

# problems(o) is the set of [place, label, "missing" | "invalid", value] that
# o has.
problems(o) := missing | invalid if {
	places := label_places(o)
	missing := {[place, key, "missing", ""] |
		some place, labels in places
		some key in required
		not has_value(labels, key)
	}
	invalid := {[place, key, "invalid", value] |
		some place, labels in places
		some key, pattern in patterns
		has_value(labels, key)
		value := labels[key]
		not regex.match(pattern, value)
	}
}

default old_problems := set()

old_problems := problems(input.request.oldObject) if {
	input.request.operation == "UPDATE"
	is_object(input.request.oldObject)
}

current_problems := problems(obj) if reviewed

new_problems := current_problems - old_problems

kept_problems := current_problems & old_problems

subject := sprintf("%s %q", [obj.kind, kubernetes.name(obj)])

missing_keys(found, place) := concat(", ", sort(keys)) if {
	keys := [p[1] |
		some p in found
		p[0] == place
		p[2] == "missing"
	]
}

deny contains msg if {
	some place in {p[0] | some p in new_problems; p[2] == "missing"}
	msg := sprintf("%s is missing required label(s) %s in %s: add them with non-empty values", [subject, missing_keys(new_problems, place), place])
}

deny contains msg if {
	some [place, key, "invalid", value] in new_problems
	msg := sprintf("%s: label %s=%q in %s does not match the required pattern %s: change its value", [subject, key, value, place, patterns[key]])
}

warn contains msg if {
	some place in {p[0] | some p in kept_problems; p[2] == "missing"}
	msg := sprintf("%s still lacks required label(s) %s in %s (it did before this update too): add them; updates that remove required labels are denied", [subject, missing_keys(kept_problems, place), place])
}

warn contains msg if {
	some [place, key, "invalid", value] in kept_problems
	msg := sprintf("%s: label %s=%q in %s still does not match the required pattern %s: change its value", [subject, key, value, place, patterns[key]])
}
