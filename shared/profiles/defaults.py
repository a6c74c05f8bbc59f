"""Default (roofline-derived) profiles for the catalogued GPUs and models, looked up by name."""

from __future__ import annotations

from shared.domain.profile import HardwareProfile
from shared.profiles.catalog import gpu_names, gpu_spec, model_names, model_spec
from shared.profiles.roofline import RooflineParams, derive_profile, fits

TP_CHOICES: tuple[int, ...] = (1, 2, 4, 8)
"""Tensor-parallel degrees tried when none is given (GPUs per node come in powers of two)."""


def smallest_fitting_tp(gpu: str, model: str, params: RooflineParams | None = None) -> int:
    """The smallest tp in TP_CHOICES that divides the model's heads and fits its weights + KV.

    Raises UnknownNameError for an unknown name, ValueError when no choice fits.
    """
    g, m = gpu_spec(gpu), model_spec(model)
    p = params if params is not None else RooflineParams()
    for tp in TP_CHOICES:
        if m.attention_heads % tp == 0 and fits(g, m, tp, p):
            return tp
    raise ValueError(
        f"{model} ({m.weight_bytes / 1e9:.1f} GB of weights) does not fit on {gpu} with any "
        f"tensor_parallel in {list(TP_CHOICES)}"
    )


def default_profile(
    gpu: str,
    model: str,
    tensor_parallel: int | None = None,
    *,
    params: RooflineParams | None = None,
) -> HardwareProfile:
    """Roofline profile of catalogued `model` on catalogued `gpu`.

    tensor_parallel None picks the smallest of 1, 2, 4, 8 that fits. Raises UnknownNameError
    (listing the valid names) for an unknown GPU or model, ValueError when it does not fit.
    """
    tp = tensor_parallel if tensor_parallel is not None else smallest_fitting_tp(gpu, model, params)
    return derive_profile(gpu_spec(gpu), model_spec(model), tp, params)


def default_profile_table(params: RooflineParams | None = None) -> list[HardwareProfile]:
    """One default profile per catalogued (GPU, model) pair, each at the smallest tp that fits.

    Ordered GPU-major in catalog order (4 GPUs x 4 models = 16 profiles).
    """
    return [default_profile(g, m, params=params) for g in gpu_names() for m in model_names()]
