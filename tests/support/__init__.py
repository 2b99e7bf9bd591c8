"""Helpers, fixtures and constants shared by several test modules. Test modules import from here, never
from one another; a fixture defined here is imported into each module that uses it, marked
`# noqa: F401 (fixture)`."""
