"""The differential conformance suite: the same OpenAI requests to a reference server (bare
vLLM) and to a deployment under test (slomesh), answers compared after removing only ids,
timestamps and fingerprints."""
