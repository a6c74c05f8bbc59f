"""slomesh shared package: domain types, config, workloads, metrics, simulator, CLI."""
