"""Bench output: markdown tables, JSON/markdown writers and PNG charts of stack summaries.

Import the submodules directly (`shared.report.table`, `shared.report.writers`,
`shared.report.plots`); this package imports nothing on its own.
"""
