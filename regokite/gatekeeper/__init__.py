"""Gatekeeper's ConstraintTemplates and Constraints, evaluated by regokite unchanged."""
