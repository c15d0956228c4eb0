"""Readers: one per file format, each returning model objects."""
