"""The `agent` item type: the service orchestrates a compute-only agent from GitLab notes."""
