"""Launching the mesh: a Serve config checked, started on Ray and stopped (`slomesh up` and
the live benchmarks start meshes through it)."""
