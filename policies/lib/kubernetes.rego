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

# image_reference(image) parses an image reference once, for every question
# asked of it: {"registry", "repository", "tag", "digest", "name", "valid"}.
# The registry host (with port, if any) is lower-cased, and "docker.io" when
# the image names none or names a Docker Hub alias; official Docker Hub images
# live under "library/". The tag and digest are "" when absent; a ":" before
# the last "/" belongs to a registry port, not to a tag. The name is the fully
# qualified name without tag or digest ("nginx:1.25" ->
# "docker.io/library/nginx"). An image that is not a string is {"valid": false}.
image_reference(image) := {
	"registry": parts.registry,
	"repository": parts.repository,
	"tag": tag,
	"digest": digest,
	"name": concat("/", [parts.registry, parts.repository]),
	"valid": {ok | some ok in checks} == {true},
} if {
	is_string(image)
	at := split(image, "@")
	digest := concat("@", array.slice(at, 1, count(at)))
	segments := split(at[0], "/")
	n := count(segments)
	last := split(segments[n - 1], ":")
	tag := concat(":", array.slice(last, 1, count(last)))
	parts := path_parts(array.concat(array.slice(segments, 0, n - 1), [last[0]]))
	checks := [
		regex.match(`[:@]$`, image) == false,
		regex.match(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`, parts.repository),
		regex.match(`^[A-Za-z0-9.-]+(?::[0-9]+)?$`, parts.registry),
		regex.match(`^(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`, tag),
		regex.match(`^(?:[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+)?$`, digest),
	]
}

image_reference(image) := {"valid": false} if not is_string(image)

# path_parts(segments) splits the path segments of an untagged image into
# registry and repository.
path_parts(segments) := registry_parts(lower(segments[0]), concat("/", array.slice(segments, 1, count(segments)))) if {
	count(segments) > 1
	registry_segment(segments[0])
} else := registry_parts("docker.io", concat("/", segments))

registry_segment(segment) if contains(segment, ".")

registry_segment(segment) if contains(segment, ":")

registry_segment(segment) if segment == "localhost"

docker_hub_hosts := {"docker.io", "index.docker.io", "registry-1.docker.io"}

registry_parts(host, path) := {"registry": "docker.io", "repository": docker_hub_repository(path)} if {
	host in docker_hub_hosts
}

registry_parts(host, path) := {"registry": host, "repository": path} if not host in docker_hub_hosts

docker_hub_repository(path) := concat("/", ["library", path]) if not contains(path, "/")

docker_hub_repository(path) := path if contains(path, "/")

# The parts of image_reference one at a time.
image_registry(image) := image_reference(image).registry

image_repository(image) := image_reference(image).repository

image_tag(image) := image_reference(image).tag

image_digest(image) := image_reference(image).digest

image_name(image) := image_reference(image).name

# valid_image_reference(image) holds when the reference is well formed: a
# lower-case path of non-empty components without "..", an optional tag and
# an optional digest.
valid_image_reference(image) if image_reference(image).valid
