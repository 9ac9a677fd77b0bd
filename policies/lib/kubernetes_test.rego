package lib.kubernetes_test

import data.lib.fixtures
import data.lib.kubernetes

spec := {
	"initContainers": [{"name": "migrate", "image": "ghcr.io/acme/migrate:1"}],
	"containers": [
		{"name": "web", "image": "ghcr.io/acme/web:2"},
		{"name": "sidecar", "image": "registry.k8s.io/pause:3.9"},
	],
	"ephemeralContainers": [{"name": "debugger", "image": "busybox"}],
}

test_pod_spec_found_in_every_workload_kind if {
	every w in fixtures.workloads(spec) {
		kubernetes.pod_spec(w).containers == spec.containers
		kubernetes.pod_spec(w).initContainers == spec.initContainers
	}
}

test_pod_spec_of_cronjob_is_under_job_template if {
	kubernetes.pod_spec_path(fixtures.cronjob(spec)) == "spec.jobTemplate.spec.template.spec"
}

test_pod_spec_of_pod_template if {
	template := {"apiVersion": "v1", "kind": "PodTemplate", "template": {"spec": spec}}
	kubernetes.pod_spec(template) == spec
	kubernetes.pod_spec_path(template) == "template.spec"
}

test_pod_spec_of_replication_controller if {
	rc := {"apiVersion": "v1", "kind": "ReplicationController", "spec": {"template": {"spec": spec}}}
	kubernetes.pod_spec(rc) == spec
}

test_pod_spec_undefined_for_kinds_without_pods if {
	not kubernetes.pod_spec(fixtures.configmap)
	not kubernetes.pod_spec_path(fixtures.configmap)
}

test_pod_spec_of_pod_without_spec_is_empty if {
	kubernetes.pod_spec({"kind": "Pod", "metadata": {"name": "x"}}) == {}
}

test_containers_include_init_and_ephemeral if {
	names := [c.name | some c in kubernetes.containers(spec)]
	names == ["migrate", "web", "sidecar", "debugger"]
}

test_containers_of_empty_spec if {
	kubernetes.containers({}) == []
}

test_container_refs_name_field_and_path if {
	refs := kubernetes.container_refs(fixtures.deployment(spec))
	count(refs) == 4
	{"name": "migrate", "field": "initContainers", "path": "spec.template.spec.initContainers[0]"} == object.remove(refs[0], ["container"])
	refs[2].path == "spec.template.spec.containers[1]"
	refs[2].container.image == "registry.k8s.io/pause:3.9"
	refs[3].path == "spec.template.spec.ephemeralContainers[0]"
}

test_container_refs_of_cronjob if {
	refs := kubernetes.container_refs(fixtures.cronjob({"containers": [{"name": "tick", "image": "busybox"}]}))
	[r.path | some r in refs] == ["spec.jobTemplate.spec.template.spec.containers[0]"]
}

test_container_refs_without_name if {
	refs := kubernetes.container_refs(fixtures.pod({"containers": [{"image": "busybox"}, {"name": 7}]}))
	refs[0].name == "#0"
	refs[1].name == "#1"
}

test_container_refs_empty_for_configmap if {
	kubernetes.container_refs(fixtures.configmap) == []
}

test_pod_template_metadata if {
	kubernetes.pod_template_metadata(fixtures.deployment(spec)) == {"labels": fixtures.labels}
	kubernetes.pod_template_metadata(fixtures.cronjob(spec)) == {"labels": fixtures.labels}
	kubernetes.pod_template_metadata({"kind": "Job", "spec": {"template": {"spec": spec}}}) == {}
	not kubernetes.pod_template_metadata(fixtures.pod(spec))
}

test_labels if {
	kubernetes.labels(fixtures.configmap) == fixtures.labels
	kubernetes.labels({"metadata": {"name": "x"}}) == {}
	kubernetes.labels({"metadata": {"labels": null}}) == {}
	kubernetes.labels({}) == {}
	kubernetes.labels(null) == {}
}

test_null_and_malformed_parts_are_tolerated if {
	kubernetes.pod_spec({"kind": "Deployment", "spec": {"template": null}}) == {}
	kubernetes.pod_template_metadata({"kind": "Deployment", "spec": {"template": {"metadata": null}}}) == {}
	kubernetes.containers({"containers": [null, "x", {"name": "ok"}], "initContainers": null}) == [{"name": "ok"}]
	kubernetes.containers(null) == []
	refs := kubernetes.container_refs({"kind": "Pod", "spec": {"containers": [null, {"name": "ok"}]}})
	[r.path | some r in refs] == ["spec.containers[1]"]
}

test_name_falls_back_to_generate_name if {
	kubernetes.name({"metadata": {"name": "a"}}) == "a"
	kubernetes.name({"metadata": {"generateName": "job-"}}) == "job-*"
	kubernetes.name({"metadata": {}}) == "<unnamed>"
}

test_json_pointer_escape if {
	kubernetes.json_pointer_escape("app.kubernetes.io/managed-by") == "app.kubernetes.io~1managed-by"
	kubernetes.json_pointer_escape("a~b/c") == "a~0b~1c"
	kubernetes.json_pointer_escape("~1") == "~01"
	kubernetes.json_pointer_escape("plain") == "plain"
}

image_cases := [
	{"image": "nginx", "registry": "docker.io", "repository": "library/nginx", "tag": "", "digest": ""},
	{"image": "nginx:1.25", "registry": "docker.io", "repository": "library/nginx", "tag": "1.25", "digest": ""},
	{"image": "bitnami/redis:7", "registry": "docker.io", "repository": "bitnami/redis", "tag": "7", "digest": ""},
	{"image": "docker.io/nginx", "registry": "docker.io", "repository": "library/nginx", "tag": "", "digest": ""},
	{"image": "index.docker.io/library/nginx:1", "registry": "docker.io", "repository": "library/nginx", "tag": "1", "digest": ""},
	{"image": "registry.k8s.io/pause:3.9", "registry": "registry.k8s.io", "repository": "pause", "tag": "3.9", "digest": ""},
	{"image": "ghcr.io/acme/api/server:v2", "registry": "ghcr.io", "repository": "acme/api/server", "tag": "v2", "digest": ""},
	{"image": "localhost:5000/app:dev", "registry": "localhost:5000", "repository": "app", "tag": "dev", "digest": ""},
	{"image": "localhost/app", "registry": "localhost", "repository": "app", "tag": "", "digest": ""},
	{"image": "Quay.IO/org/app", "registry": "quay.io", "repository": "org/app", "tag": "", "digest": ""},
	{
		"image": "ghcr.io/acme/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"registry": "ghcr.io",
		"repository": "acme/web",
		"tag": "",
		"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	},
	{"image": "ghcr.io:443/acme/web:1@sha256:abc", "registry": "ghcr.io:443", "repository": "acme/web", "tag": "1", "digest": "sha256:abc"},
	{"image": "registry.k8s.io.evil.com/pause", "registry": "registry.k8s.io.evil.com", "repository": "pause", "tag": "", "digest": ""},
]

test_image_parsing if {
	every case in image_cases {
		kubernetes.image_registry(case.image) == case.registry
		kubernetes.image_repository(case.image) == case.repository
		kubernetes.image_tag(case.image) == case.tag
		kubernetes.image_digest(case.image) == case.digest
		kubernetes.image_name(case.image) == concat("/", [case.registry, case.repository])
	}
}

test_valid_image_references if {
	every case in image_cases {
		kubernetes.valid_image_reference(case.image)
	}
}

test_invalid_image_references if {
	every image in [null, 7, "", "ghcr.io/acme/../evil/x", "ghcr.io//x", "ghcr.io/Acme/web", "web app", "ghcr.io/acme/web:", "ghcr.io/acme/web:bad tag"] {
		not kubernetes.valid_image_reference(image)
	}
}
