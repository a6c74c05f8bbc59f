"""Per-request records and their aggregates."""
