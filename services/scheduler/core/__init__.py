"""Pure scheduler core for the live mesh: admission and placement over a live view of replicas."""
