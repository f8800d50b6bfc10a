"""The HTTP surface: `create_app(...)` and its routes."""
