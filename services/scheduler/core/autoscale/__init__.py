"""Replica autoscaling: policies that turn a model's load into a desired replica count (pure)."""
