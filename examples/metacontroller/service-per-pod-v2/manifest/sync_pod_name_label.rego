# Metacontroller's service-per-pod-v2 example, its sync-pod-name-label.jsonnet
# hook as Rego: a Pod annotated pod-name-label=<key> gets the label
# <key>=<its name>.
package examples.metacontroller.service_per_pod_v2.sync_pod_name_label

labels := {input.object.metadata.annotations["pod-name-label"]: input.object.metadata.name}
