"""Admission: AdmissionReview in, Rego decisions, AdmissionReview out."""
