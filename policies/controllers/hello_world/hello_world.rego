# Metacontroller's HelloWorld example as a CompositeController sync hook:
# every HelloWorld gets one Pod, named like it, that greets spec.who once.
#
# Sync hook input: {controller, parent, children, related, finalizing}, with
# children keyed "Kind.apiVersion" ("Pod.v1"), then by name.
# Outputs: children (the desired Pods) and status (the observed pod count).
package controllers.hello_world

# who is spec.who, "World" when it is missing, null or empty.
default who := "World"

who := input.parent.spec.who if {
	is_string(input.parent.spec.who)
	input.parent.spec.who != ""
}

# The parent's namespace, when it has one (Metacontroller puts children in
# the parent's namespace either way).
namespace := {"namespace": ns} if {
	ns := input.parent.metadata.namespace
	is_string(ns)
} else := {}

pod := {
	"apiVersion": "v1",
	"kind": "Pod",
	"metadata": object.union({"name": input.parent.metadata.name}, namespace),
	"spec": {
		"restartPolicy": "OnFailure",
		"containers": [{
			"name": "hello",
			"image": "busybox",
			"command": ["echo", sprintf("Hello, %s!", [who])],
		}],
	},
}

children := [pod]

# status counts the Pods Metacontroller observed, not the desired ones.
status := {"pods": count(object.get(input, ["children", "Pod.v1"], {}))}
