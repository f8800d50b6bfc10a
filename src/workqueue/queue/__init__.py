"""The generic work-queue engine.

Nothing in this package knows about a particular item type, GitLab or HTTP:
types plug in through `TypeRegistry` (see `registry.py`).
"""
