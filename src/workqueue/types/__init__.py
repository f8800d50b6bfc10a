"""Item types that plug into the generic engine.

Each subpackage owns one item type: its submission schema, validation policy,
detail table and executors. The engine in `workqueue.queue` knows none of them;
types register themselves explicitly where the application is assembled.
"""
