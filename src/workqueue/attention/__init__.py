"""Attention queues: named lists of items that need a person, kept by a scoped reconciler.

Generic over item types: it depends on `queue/` and reads a type's detail
columns only through the model the type registered (`details.py`).
"""
