"""The QLM global scheduler: its problem (`problem`), solvers (`ilp`, `heuristic`, `brute_force`
for tests), their registry (`registry.GLOBAL_SOLVERS`), `config` and `global_scheduler`.

Kept free of imports so that reading the config does not load HiGHS.
"""
