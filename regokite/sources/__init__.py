"""Policies and definitions read from the cluster: kube-mgmt's ConfigMaps (`configmap_policies`),
Gatekeeper's ConstraintTemplates and Constraints (`gatekeeper_objects`), controller definitions
(`cluster_definitions`). Each follows its objects with informers and hands on a loaded set."""
