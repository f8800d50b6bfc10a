"""The operator dashboard at `/ui/`: server-rendered pages over the API's own services.

A thin adapter like `api/`: every page calls the functions the JSON routes
use (so scoping, permissions and audit are theirs), renders Jinja2 templates
and leaves live refresh and the pasted token to a small script on top of htmx.
"""
