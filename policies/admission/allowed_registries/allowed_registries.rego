# Every container image (init, regular and ephemeral containers, in Pods and
# in workload pod templates) must come from an allowed registry.
#
# Images are compared by their fully qualified name, the way the container
# runtime resolves them: "nginx" is "docker.io/library/nginx" and
# "bitnami/redis" is "docker.io/bitnami/redis". An allowed entry ending in "/"
# is a prefix ("ghcr.io/acme/" allows everything under it); any other entry is
# a registry or a repository that must match up to a "/" boundary, so
# "registry.k8s.io" allows "registry.k8s.io/pause" but not
# "registry.k8s.io.evil.com/pause" and "ghcr.io/acme" does not allow
# "ghcr.io/acme-evil/x".
#
# Parameters (data.params.allowed_registries):
#   registries      allowed registries, repositories or prefixes
#   require_digest  true to deny images not pinned by digest
package admission.allowed_registries

import data.lib.kubernetes

match := {
	"rules": [
		{
			"operations": ["CREATE", "UPDATE"],
			"apiGroups": [""],
			"apiVersions": ["v1"],
			"resources": ["pods", "pods/ephemeralcontainers", "podtemplates", "replicationcontrollers"],
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
	"excludedNamespaces": ["kube-system"],
}

enforcement := "deny"

failure_policy := "Fail"

default registries := ["registry.k8s.io/", "ghcr.io/acme/"]

registries := data.params.allowed_registries.registries

default require_digest := false

require_digest := data.params.allowed_registries.require_digest

obj := input.request.object

reviewed if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
}

refs := kubernetes.container_refs(obj) if reviewed

allowed_by(name, entry) if {
	endswith(entry, "/")
	startswith(name, entry)
}

allowed_by(name, entry) if {
	not endswith(entry, "/")
	name == entry
}

allowed_by(name, entry) if {
	not endswith(entry, "/")
	startswith(name, concat("", [entry, "/"]))
}

allowed(name) if {
	some entry in registries
	allowed_by(name, lower(entry))
}

allowed_list := concat(", ", sort([e | some e in registries]))

# images parses every container's image once per request: the reference
# helpers split and match the same strings, and each deny and warn rule below
# needs them.
images := [image |
	some ref in refs
	image := object.union(ref, parsed(ref.container))
]

parsed(container) := with_image(container.image, kubernetes.image_reference(container.image)) if container.image

parsed(container) := {"valid": false} if not container.image

with_image(image, ref) := {"image": image, "valid": true, "qualified": ref.name, "digest": ref.digest, "tag": ref.tag} if ref.valid

with_image(image, ref) := {"image": image, "valid": false} if not ref.valid

deny contains msg if {
	some ref in images
	not "image" in object.keys(ref)
	msg := sprintf("container %q (%s) has no image: set %s.image to an image from an allowed registry (%s)", [ref.name, ref.path, ref.path, allowed_list])
}

deny contains msg if {
	some ref in images
	"image" in object.keys(ref)
	not ref.valid
	msg := sprintf("container %q (%s) has image %s, which is not a valid image reference: use registry/repository[:tag][@digest] from an allowed registry (%s)", [ref.name, ref.path, json.marshal(ref.image), allowed_list])
}

deny contains msg if {
	some ref in images
	ref.valid
	not allowed(ref.qualified)
	msg := sprintf("container %q (%s) uses image %q (%s), which is not from an allowed registry: push it to one of %s and reference it by its full name", [ref.name, ref.path, ref.image, ref.qualified, allowed_list])
}

deny contains msg if {
	require_digest == true
	some ref in images
	ref.valid
	ref.digest == ""
	msg := sprintf("container %q (%s) uses image %q without a digest: pin it as %s@sha256:<digest>", [ref.name, ref.path, ref.image, ref.qualified])
}

warn contains msg if {
	some ref in images
	ref.valid
	ref.digest == ""
	ref.tag in {"", "latest"}
	msg := sprintf("container %q (%s) uses image %q, which floats with the latest tag: pin a version tag or a digest", [ref.name, ref.path, ref.image])
}
