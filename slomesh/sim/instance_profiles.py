"""The profiles of the models an instance spec serves: a profile file it names, or the
roofline catalogue's."""

from __future__ import annotations

from pathlib import Path

from shared.domain import HardwareProfile
from shared.profiles.defaults import default_profile
from shared.profiles.io import load_profiles
from slomesh.sim.cluster import InstanceSpec

PROFILES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "ray" / "profiles"
"""Where a relative `InstanceSpec.profile_file` is read from."""


def instance_profiles(spec: InstanceSpec) -> dict[str, HardwareProfile]:
    """Model -> the profile each model of `spec` runs with on its instances."""
    if spec.profile_file is not None:
        path = Path(spec.profile_file)
        found = {
            p.model: p for p in load_profiles(path if path.is_absolute() else PROFILES_DIR / path)
        }
        missing = [m for m in spec.models if m not in found]
        if missing:
            raise ValueError(
                f"profile_file {spec.profile_file}: no profile of {', '.join(missing)} "
                f"(it has {', '.join(found)})"
            )
        return {m: found[m] for m in spec.models}
    tp = spec.tensor_parallel
    if tp is None:  # one TP degree for the whole instance: what its largest model needs
        tp = max(default_profile(spec.gpu, m).tensor_parallel for m in spec.models)
    return {m: default_profile(spec.gpu, m, tp) for m in spec.models}
