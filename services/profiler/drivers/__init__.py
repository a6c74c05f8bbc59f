"""Engine drivers of the profiler: run the pure sweep against a simulated or a real vLLM engine.

Import the submodules directly: `vllm_engine` needs vLLM (imported when a profile starts),
`sim` only the simulated engine.
"""
