"""The generic HTTP routes: work items, their history, attention queues, health, metrics
and the offline API docs. Each item type brings its own routes (`types/<name>/routes.py`)."""
