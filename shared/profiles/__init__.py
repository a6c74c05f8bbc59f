"""Hardware profiles: GPU/model catalog, roofline-derived defaults and refitting from measurements.

See shared/README.md, "Hardware profile". Importing this package has no side effects; profiles
are built on request.
"""

from shared.profiles.catalog import gpu_names, gpu_spec, model_names, model_spec
from shared.profiles.defaults import (
    TP_CHOICES,
    default_profile,
    default_profile_table,
    smallest_fitting_tp,
)
from shared.profiles.fit import (
    DecodeSample,
    FitResult,
    PrefillSample,
    fit_decode,
    fit_inefficiency,
    fit_prefill,
    refit_profile,
)
from shared.profiles.roofline import (
    RooflineParams,
    check_tensor_parallel,
    derive_profile,
    fits,
    kv_capacity_bytes,
    min_tensor_parallel,
)

__all__ = [
    "TP_CHOICES",
    "DecodeSample",
    "FitResult",
    "PrefillSample",
    "RooflineParams",
    "check_tensor_parallel",
    "default_profile",
    "default_profile_table",
    "derive_profile",
    "fit_decode",
    "fit_inefficiency",
    "fit_prefill",
    "fits",
    "gpu_names",
    "gpu_spec",
    "kv_capacity_bytes",
    "min_tensor_parallel",
    "model_names",
    "model_spec",
    "refit_profile",
    "smallest_fitting_tp",
]
