"""Policies read from the cluster: kube-mgmt's ConfigMaps (`configmap_policies`) and Gatekeeper's
ConstraintTemplates and Constraints (`gatekeeper_objects`). Each follows its objects with informers and
writes a loaded set as a policy directory the servers read. (Controller definitions read from the cluster
are `regokite.controllers.cluster_definitions`.)"""
