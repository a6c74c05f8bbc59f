"""slomesh services: one folder per deployment, each a pure core plus a thin shell."""
