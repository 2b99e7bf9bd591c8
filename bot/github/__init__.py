"""GitHub: credentials, the `Forge` operations we use, publishing and reporting."""
