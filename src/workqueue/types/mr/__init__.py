"""The `mr` item type: put submitted file changes on a bot branch and shepherd the MR.

Importing this package has no side effects; registration with the engine is
done explicitly by the code that assembles the application.
"""
