"""Pure simulated-engine core: no Ray, no gRPC, no wall clock (times are passed in)."""
