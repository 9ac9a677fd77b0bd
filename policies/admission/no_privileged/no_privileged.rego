# Pods may not escape their sandbox: no privileged containers, no privilege
# escalation, no host namespaces, no Windows host-process containers and no
# capabilities that amount to root on the node. Containers that may run as
# root only get a warning.
#
# Parameters (data.params.no_privileged):
#   forbidden_capabilities  capabilities that may not be added (without "CAP_")
#
# Namespaces labelled regokite.io/privileged=allowed are not reviewed (for
# CNI, CSI and monitoring agents).
package admission.no_privileged

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
	"namespaceSelector": {"matchExpressions": [{"key": "regokite.io/privileged", "operator": "NotIn", "values": ["allowed"]}]},
}

enforcement := "deny"

failure_policy := "Fail"

default forbidden_capabilities := ["ALL", "SYS_ADMIN"]

forbidden_capabilities := data.params.no_privileged.forbidden_capabilities

host_namespaces := {
	"hostNetwork": "the host network",
	"hostPID": "the host PID namespace",
	"hostIPC": "the host IPC namespace",
}

obj := input.request.object

reviewed if {
	input.request.operation in {"CREATE", "UPDATE"}
	is_object(obj)
}

spec := kubernetes.pod_spec(obj) if reviewed

refs := kubernetes.container_refs(obj) if reviewed

security_context(ref) := kubernetes.as_object(object.get(ref.container, "securityContext", {}))

capability(name) := upper(trim_prefix(upper(name), "CAP_"))

deny contains msg if {
	some field, what in host_namespaces
	spec[field] == true
	path := concat(".", [kubernetes.pod_spec_path(obj), field])
	msg := sprintf("%s %q uses %s (%s: true): remove %s or set it to false", [obj.kind, kubernetes.name(obj), what, path, path])
}

deny contains msg if {
	spec.securityContext.windowsOptions.hostProcess == true
	path := concat(".", [kubernetes.pod_spec_path(obj), "securityContext.windowsOptions.hostProcess"])
	msg := sprintf("%s %q runs Windows host-process containers (%s: true): remove it or set it to false", [obj.kind, kubernetes.name(obj), path])
}

deny contains msg if {
	some ref in refs
	security_context(ref).privileged == true
	msg := sprintf("container %q (%s) runs privileged: remove %s.securityContext.privileged or set it to false", [ref.name, ref.path, ref.path])
}

deny contains msg if {
	some ref in refs
	security_context(ref).allowPrivilegeEscalation == true
	msg := sprintf("container %q (%s) allows privilege escalation: set %s.securityContext.allowPrivilegeEscalation to false", [ref.name, ref.path, ref.path])
}

deny contains msg if {
	some ref in refs
	security_context(ref).windowsOptions.hostProcess == true
	msg := sprintf("container %q (%s) is a Windows host-process container: remove %s.securityContext.windowsOptions.hostProcess or set it to false", [ref.name, ref.path, ref.path])
}

deny contains msg if {
	some ref in refs
	some added in object.get(security_context(ref), ["capabilities", "add"], [])
	forbidden := {capability(c) | some c in forbidden_capabilities}
	capability(added) in forbidden
	msg := sprintf("container %q (%s) adds capability %s: remove it from %s.securityContext.capabilities.add", [ref.name, ref.path, added, ref.path])
}

# effective(ref, field) is the container's securityContext setting, falling
# back to the pod's; null when neither sets it.
effective(ref, field) := value if {
	value := security_context(ref)[field]
	value != null
} else := object.get(spec, ["securityContext", field], null)

runs_as_non_root(ref) if effective(ref, "runAsNonRoot") == true

runs_as_non_root(ref) if {
	user := effective(ref, "runAsUser")
	is_number(user)
	user > 0
}

warn contains msg if {
	some ref in refs
	not runs_as_non_root(ref)
	msg := sprintf("container %q (%s) may run as root: set securityContext.runAsNonRoot: true (on the container or the pod) or a non-zero runAsUser", [ref.name, ref.path])
}
