# Metacontroller's service-per-pod-v2 example, its finalize-service-per-pod.jsonnet
# hook as Rego: when the StatefulSet is deleted or stops matching the
# decorator's selector, its Services are removed, and the finalizer goes once
# none is observed.
package examples.metacontroller.service_per_pod_v2.finalize_service_per_pod

attachments := []

finalized := count(input.attachments["Service.v1"]) == 0
