# Metacontroller's pod-name-label decorator: a Pod annotated with
# pod-name-label=<key> gets the label <key>=<pod name>.
#
# Labels are applied with server-side apply under this decorator's own field
# manager: a label the hook stops setting is removed only if this decorator
# set it, and labels set by others are never touched.
package controllers.pod_name_label

labels := {key: input.object.metadata.name} if {
	key := input.object.metadata.annotations["pod-name-label"]
	key != ""
}
