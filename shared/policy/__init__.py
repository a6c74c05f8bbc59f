"""Policy plumbing shared by every family: the name registry."""

from shared.policy.registry import Registry, UnknownNameError

__all__ = ["Registry", "UnknownNameError"]
