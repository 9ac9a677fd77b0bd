"""Audit: the admission policies on objects that already exist, results as PolicyReports."""
