"""The papers' diagnostics: pure functions on arrays, and a probe that runs a model.

Each function cites the paper and equation it implements.
"""
