"""The ingress: the mesh's OpenAI-compatible HTTP and gRPC entry point (pure core in `core`)."""
