# Test fixtures shared by the policy tests: AdmissionReview requests as the
# API server sends them, and the workload kinds that carry a pod spec. Lives
# in a *_test.rego file so it is loaded for tests only, never for serving.
package lib.fixtures

uid := "0df28fbd-5f5f-4eb9-a24c-6e0e7b3b6f2a"

gvr := {
	"Pod": {"group": "", "version": "v1", "resource": "pods"},
	"PodTemplate": {"group": "", "version": "v1", "resource": "podtemplates"},
	"ReplicationController": {"group": "", "version": "v1", "resource": "replicationcontrollers"},
	"Service": {"group": "", "version": "v1", "resource": "services"},
	"ConfigMap": {"group": "", "version": "v1", "resource": "configmaps"},
	"Deployment": {"group": "apps", "version": "v1", "resource": "deployments"},
	"ReplicaSet": {"group": "apps", "version": "v1", "resource": "replicasets"},
	"StatefulSet": {"group": "apps", "version": "v1", "resource": "statefulsets"},
	"DaemonSet": {"group": "apps", "version": "v1", "resource": "daemonsets"},
	"Job": {"group": "batch", "version": "v1", "resource": "jobs"},
	"CronJob": {"group": "batch", "version": "v1", "resource": "cronjobs"},
	"HorizontalPodAutoscaler": {"group": "autoscaling", "version": "v2", "resource": "horizontalpodautoscalers"},
}

# subject(obj, old) is the object a request is about: the new object, or the
# old one on DELETE.
subject(obj, _) := obj if obj != null

subject(obj, old) := old if obj == null

# review(operation, obj, old) is an AdmissionReview (admission.k8s.io/v1).
review(operation, obj, old) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": uid,
		"kind": {"group": target.group, "version": target.version, "kind": about.kind},
		"resource": {"group": target.group, "version": target.version, "resource": target.resource},
		"name": object.get(about, ["metadata", "name"], ""),
		"namespace": object.get(about, ["metadata", "namespace"], "default"),
		"operation": operation,
		"userInfo": {"username": "jane@example.com", "groups": ["developers", "system:authenticated"]},
		"object": obj,
		"oldObject": old,
		"dryRun": false,
	},
} if {
	about := subject(obj, old)
	target := gvr[about.kind]
}

create(obj) := review("CREATE", obj, null)

update(obj, old) := review("UPDATE", obj, old)

delete(old) := review("DELETE", null, old)

# A ConfigMap: an object that runs no pods.
configmap := {
	"apiVersion": "v1",
	"kind": "ConfigMap",
	"metadata": {"name": "settings", "namespace": "shop", "labels": labels},
	"data": {"color": "blue"},
}

labels := {"app.kubernetes.io/name": "web", "owner": "team-a"}

meta(kind) := {"name": concat("-", ["web", lower(kind)]), "namespace": "shop", "labels": labels}

template(spec) := {"metadata": {"labels": labels}, "spec": spec}

pod(spec) := {"apiVersion": "v1", "kind": "Pod", "metadata": meta("Pod"), "spec": spec}

deployment(spec) := {
	"apiVersion": "apps/v1",
	"kind": "Deployment",
	"metadata": meta("Deployment"),
	"spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": template(spec)},
}

replicaset(spec) := {
	"apiVersion": "apps/v1",
	"kind": "ReplicaSet",
	"metadata": meta("ReplicaSet"),
	"spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": template(spec)},
}

statefulset(spec) := {
	"apiVersion": "apps/v1",
	"kind": "StatefulSet",
	"metadata": meta("StatefulSet"),
	"spec": {"replicas": 3, "serviceName": "web", "selector": {"matchLabels": labels}, "template": template(spec)},
}

daemonset(spec) := {
	"apiVersion": "apps/v1",
	"kind": "DaemonSet",
	"metadata": meta("DaemonSet"),
	"spec": {"selector": {"matchLabels": labels}, "template": template(spec)},
}

job(spec) := {
	"apiVersion": "batch/v1",
	"kind": "Job",
	"metadata": meta("Job"),
	"spec": {"backoffLimit": 2, "template": template(object.union({"restartPolicy": "Never"}, spec))},
}

cronjob(spec) := {
	"apiVersion": "batch/v1",
	"kind": "CronJob",
	"metadata": meta("CronJob"),
	"spec": {
		"schedule": "*/5 * * * *",
		"jobTemplate": {"spec": {"template": template(object.union({"restartPolicy": "OnFailure"}, spec))}},
	},
}

# workloads(spec) is one object of every kind that runs pods from spec.
workloads(spec) := [
	pod(spec),
	deployment(spec),
	replicaset(spec),
	statefulset(spec),
	daemonset(spec),
	job(spec),
	cronjob(spec),
]
