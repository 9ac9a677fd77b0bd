"""Kubernetes structural schemas (a CRD's openAPIV3Schema), applied to objects as the API server applies
them: pruning of unknown fields, defaulting, and validation with the API server's wording. Pure: one
implementation for every place regokite reads a Gatekeeper constraint's parameters."""
