"""Unit tests of regokite/kube/ over an in-memory API server (`fake`). Not named `kube`: the integration
tests import their helper module tests/integration/kube.py as `kube`."""
