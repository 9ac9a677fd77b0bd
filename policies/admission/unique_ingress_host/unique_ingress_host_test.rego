package admission.unique_ingress_host_test

import data.admission.unique_ingress_host

ingress(namespace, name, hosts) := {
	"apiVersion": "networking.k8s.io/v1",
	"kind": "Ingress",
	"metadata": {"name": name, "namespace": namespace},
	"spec": {"rules": [{"host": h} | some h in hosts]},
}

review(operation, o) := {"request": {
	"uid": "0df28fbd-5f5f-4eb9-a24c-6e0e7b3b6f2a",
	"kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
	"resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
	"name": o.metadata.name,
	"namespace": o.metadata.namespace,
	"operation": operation,
	"object": o,
}}

cluster := {
	"shop": {"web": ingress("shop", "web", ["shop.example.com"])},
	"blog": {"blog": ingress("blog", "blog", ["blog.example.com", "www.example.com"])},
}

test_a_host_in_use_elsewhere_is_denied_naming_the_other_ingress if {
	denials := unique_ingress_host.deny with input as review("CREATE", ingress("team", "new", ["www.example.com"]))
		with data.kubernetes.ingresses as cluster
	denials == {`host "www.example.com" is already served by Ingress blog/blog: choose another host`}
}

test_a_second_ingress_in_the_same_namespace_is_denied if {
	count(unique_ingress_host.deny) == 1 with input as review("CREATE", ingress("shop", "web2", ["shop.example.com"]))
		with data.kubernetes.ingresses as cluster
}

test_a_new_host_is_allowed if {
	count(unique_ingress_host.deny) == 0 with input as review("CREATE", ingress("shop", "api", ["api.example.com"]))
		with data.kubernetes.ingresses as cluster
}

test_updating_an_ingress_does_not_conflict_with_itself if {
	count(unique_ingress_host.deny) == 0 with input as review("UPDATE", ingress("shop", "web", ["shop.example.com"]))
		with data.kubernetes.ingresses as cluster
}

test_nothing_replicated_yet_allows if {
	count(unique_ingress_host.deny) == 0 with input as review("CREATE", ingress("shop", "x", ["shop.example.com"]))
		with data.kubernetes.ingresses as {}
}

test_rules_without_host_never_conflict if {
	count(unique_ingress_host.deny) == 0 with input as review("CREATE", ingress("shop", "x", []))
		with data.kubernetes.ingresses as {"shop": {"y": {"spec": {"rules": [{"http": {}}]}}}}
}
