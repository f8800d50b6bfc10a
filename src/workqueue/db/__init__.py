"""Database access: URLs, the embedded cluster, engines and migrations."""
