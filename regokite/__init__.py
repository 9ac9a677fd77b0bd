"""regokite: Kubernetes automation whose every decision is made by Rego policies."""

__version__ = "0.1.0"
