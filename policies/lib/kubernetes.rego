# Helpers shared by the admission and controller policies: where the pod spec
# lives in each workload kind, every container of a pod spec with its field
# path, image reference parsing, and JSON Pointer escaping.
package lib.kubernetes

# Kinds that carry a pod template at spec.template.
template_kinds := {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "ReplicationController"}

# Kinds that carry replicas at spec.replicas.
replicated_kinds := {"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"}

# Container lists of a pod spec, in the order the kubelet starts them.
container_fields := ["initContainers", "containers", "ephemeralContainers"]

# pod_spec_path(obj) is the dotted path of the pod spec inside obj; undefined
# for kinds that do not run pods.
pod_spec_path(obj) := "spec" if obj.kind == "Pod"

pod_spec_path(obj) := "spec.template.spec" if obj.kind in template_kinds

pod_spec_path(obj) := "template.spec" if obj.kind == "PodTemplate"

pod_spec_path(obj) := "spec.jobTemplate.spec.template.spec" if obj.kind == "CronJob"

# pod_spec(obj) is the pod spec of a Pod, a pod template or a workload
# ({} when it is missing or null).
pod_spec(obj) := as_object(object.get(obj, split(pod_spec_path(obj), "."), {}))

# pod_template_metadata(obj) is the metadata of the pod template of a workload;
# undefined for a Pod (whose own metadata is obj.metadata).
pod_template_metadata(obj) := as_object(object.get(obj, template_metadata_path(obj), {}))

template_metadata_path(obj) := ["spec", "template", "metadata"] if obj.kind in template_kinds

template_metadata_path(obj) := ["template", "metadata"] if obj.kind == "PodTemplate"

template_metadata_path(obj) := ["spec", "jobTemplate", "spec", "template", "metadata"] if obj.kind == "CronJob"

# as_object(x) is x if it is an object, else {}: API objects may carry null
# where a map is expected.
as_object(x) := x if is_object(x)

as_object(x) := {} if not is_object(x)

# as_array(x) is x if it is an array, else [].
as_array(x) := x if is_array(x)

as_array(x) := [] if not is_array(x)

# containers(spec) is every container of a pod spec: init, regular and
# ephemeral containers.
containers(spec) := [c |
	some field in container_fields
	some c in as_array(object.get(as_object(spec), field, []))
	is_object(c)
]

# container_refs(obj) lists every container of obj's pod spec with where it
# is, for messages: {"container", "name", "field", "path"}, path being like
# "spec.template.spec.initContainers[0]".
container_refs(obj) := [ref |
	base := pod_spec_path(obj)
	spec := pod_spec(obj)
	some field in container_fields
	some i, c in as_array(object.get(spec, field, []))
	is_object(c)
	ref := {
		"container": c,
		"name": container_name(c, i),
		"field": field,
		"path": sprintf("%s.%s[%d]", [base, field, i]),
	}
]

# container_name(c, i) is the name of container c at index i, "#<i>" when it
# has no (string) name.
container_name(c, _) := c.name if is_string(object.get(c, "name", null))

container_name(c, i) := sprintf("#%d", [i]) if not is_string(object.get(c, "name", null))

# labels(obj) is obj's labels, or {} when it has none.
labels(obj) := as_object(object.get(as_object(obj), ["metadata", "labels"], {}))

# name(obj) is obj's name, falling back to generateName, then "<unnamed>".
name(obj) := obj.metadata.name

name(obj) := sprintf("%s*", [obj.metadata.generateName]) if {
	not obj.metadata.name
	obj.metadata.generateName
}

name(obj) := "<unnamed>" if {
	not obj.metadata.name
	not obj.metadata.generateName
}

# json_pointer_escape(s) escapes one reference token for an RFC 6901 JSON
# Pointer: "~" becomes "~0" and "/" becomes "~1", in that order.
json_pointer_escape(s) := replace(replace(s, "~", "~0"), "/", "~1")

# Image references --------------------------------------------------------
#
# An image is [registry/]path[:tag][@digest]. The first path segment is a
# registry only if it has a "." or ":" in it or is "localhost"; otherwise the
# image is on Docker Hub, and a single-segment Docker Hub path lives under
# "library/" ("nginx" is "docker.io/library/nginx").

# image_digest(image) is the digest after "@", or "" when there is none.
image_digest(image) := substring(image, indexof(image, "@") + 1, -1) if contains(image, "@")

image_digest(image) := "" if not contains(image, "@")

# image_tag(image) is the tag, or "" when there is none. A ":" before the last
# "/" belongs to a registry port, not to a tag.
image_tag(image) := tag if {
	segments := split(split(image, "@")[0], "/")
	last := segments[count(segments) - 1]
	contains(last, ":")
	tag := substring(last, indexof(last, ":") + 1, -1)
}

image_tag(image) := "" if {
	segments := split(split(image, "@")[0], "/")
	not contains(segments[count(segments) - 1], ":")
}

# image_path(image) is the image name as written, without tag or digest.
image_path(image) := concat("/", array.concat(array.slice(segments, 0, n - 1), [untagged])) if {
	segments := split(split(image, "@")[0], "/")
	n := count(segments)
	untagged := split(segments[n - 1], ":")[0]
}

registry_segment(segment) if contains(segment, ".")

registry_segment(segment) if contains(segment, ":")

registry_segment(segment) if segment == "localhost"

docker_hub_hosts := {"docker.io", "index.docker.io", "registry-1.docker.io"}

# image_parts(image) is {"registry", "repository"}: the registry host (with
# port, if any), lower-cased, "docker.io" when the image names none or names a
# Docker Hub alias; and the repository within it, official Docker Hub images
# living under "library/". The path is split once for both.
image_parts(image) := parts if {
	segments := split(image_path(image), "/")
	count(segments) > 1
	registry_segment(segments[0])
	parts := registry_parts(lower(segments[0]), concat("/", array.slice(segments, 1, count(segments))))
} else := registry_parts("docker.io", image_path(image))

registry_parts(host, path) := {"registry": "docker.io", "repository": docker_hub_repository(path)} if {
	host in docker_hub_hosts
}

registry_parts(host, path) := {"registry": host, "repository": path} if not host in docker_hub_hosts

docker_hub_repository(path) := concat("/", ["library", path]) if not contains(path, "/")

docker_hub_repository(path) := path if contains(path, "/")

# image_registry(image) is the registry host of image_parts.
image_registry(image) := image_parts(image).registry

# image_repository(image) is the repository of image_parts.
image_repository(image) := image_parts(image).repository

# image_name(image) is the fully qualified name without tag or digest, e.g.
# "nginx:1.25" -> "docker.io/library/nginx".
image_name(image) := concat("/", [parts.registry, parts.repository]) if parts := image_parts(image)

# valid_image_reference(image) holds when the reference is well formed: a
# lower-case path of non-empty components without "..", an optional tag and
# an optional digest.
valid_image_reference(image) if {
	is_string(image)
	not regex.match(`[:@]$`, image)
	parts := image_parts(image)
	regex.match(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`, parts.repository)
	regex.match(`^[A-Za-z0-9.-]+(?::[0-9]+)?$`, parts.registry)
	regex.match(`^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`, image_tag(image))
	regex.match(`^(?:[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+)?$`, image_digest(image))
}
