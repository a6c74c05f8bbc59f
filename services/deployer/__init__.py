"""Deployer service: replica placement on an inventory of nodes and the Ray Serve config for it."""
