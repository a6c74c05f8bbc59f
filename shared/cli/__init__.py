"""The `slomesh` command line."""
