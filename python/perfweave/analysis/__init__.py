"""Analyses: models in, plain data (JSON-ready dicts) out."""
