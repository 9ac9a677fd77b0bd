"""Kubernetes manifests generated from what the policies and definitions declare."""
