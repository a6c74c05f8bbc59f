"""Serving stacks (whole-system presets) as data: base.py, one file per family, registry.py."""
