"""Analyses: models in, typed results and plain data (JSON-ready dicts) out; also what
is derived from a trace rank by rank for more than one use above (trace_source: the
traces read for the exports and for an imported experiment's profile, imported_profile:
that profile, written by perfweave import and computed for an older import)."""
