"""`slomesh bench-agree`: one seeded open-loop workload on the live mesh and on the simulator."""
