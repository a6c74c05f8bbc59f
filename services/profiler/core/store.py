"""ProfileStore: hardware profiles by (gpu, model, tensor_parallel), and per-request estimates.

Lookup order for a key: a profile registered with put() (measured/fitted, or any profile for a
device outside the catalog such as "cpu"), else the roofline default of shared.profiles (derived
on first use and cached). tensor_parallel None means the smallest of 1, 2, 4, 8 that fits for a
catalogued (gpu, model) pair, and the smallest registered one otherwise.

Estimates (shared/README.md; EstimateReply in proto/slomesh/v1/profiler.proto), with I the input
tokens and O the predicted mean output tokens (capped by the request's max_tokens):
    prefill_s          = T_prefill(1, I)
    decode_s_per_token = tau_decode(I + O/2, 1)   one batch-1 step at the mean context
    kv_bytes           = ceil((I + O) · Δ)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from shared.domain import HardwareProfile, Request
from shared.policy.registry import UnknownNameError
from shared.profiles import (
    TP_CHOICES,
    RooflineParams,
    default_profile,
    fits,
    gpu_names,
    gpu_spec,
    model_names,
    model_spec,
    smallest_fitting_tp,
)

CPU_DEVICE = "cpu"
"""Device name of CPU replicas (the tiny local model); its profiles must be registered."""

ProfileKey = tuple[str, str, int]


class ProfileLookupError(UnknownNameError):
    """No profile for a (gpu, model, tensor_parallel) request; `field` names the culprit.

    field is "gpu", "model" or "tensor_parallel"; valid lists what that field may be instead.
    """

    def __init__(self, field: str, value: object, valid: Sequence[object], detail: str) -> None:
        super().__init__(field, str(value), [str(v) for v in valid])
        self.field = field
        self.args = (f"{self.args[0]}; {detail}",)


class SupportsMeanTokens(Protocol):
    """Anything with a predicted mean output length (LengthDistribution, LengthPrediction)."""

    @property
    def mean_tokens(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Estimate:
    """Resources of one request on one replica type (EstimateReply, in seconds and bytes).

    prefill_s: prefill of the prompt alone at batch 1.
    decode_s_per_token: one decode step at batch 1 and the request's mean context.
    kv_bytes: KV cache at the predicted mean final length.
    profile_source: the profile used ("derived:roofline(...)" or "fitted:...").
    """

    prefill_s: float
    decode_s_per_token: float
    kv_bytes: int
    profile_source: str


class ProfileStore:
    """Registered and default hardware profiles; pure and deterministic (module docstring)."""

    def __init__(
        self, roofline: RooflineParams | None = None, profiles: Iterable[HardwareProfile] = ()
    ) -> None:
        self.roofline = roofline if roofline is not None else RooflineParams()
        self._registered: dict[ProfileKey, HardwareProfile] = {}
        self._derived: dict[ProfileKey, HardwareProfile] = {}
        for p in profiles:
            self.put(p)

    def put(self, profile: HardwareProfile) -> None:
        """Register a measured/fitted (or device-specific) profile; it replaces any earlier one
        and the roofline default at its key."""
        if not isinstance(profile, HardwareProfile):
            raise TypeError(f"profile must be a HardwareProfile, got {type(profile).__name__}")
        self._registered[(profile.gpu, profile.model, profile.tensor_parallel)] = profile

    def registered(self) -> list[HardwareProfile]:
        """Profiles registered with put(), sorted by key."""
        return [self._registered[k] for k in sorted(self._registered)]

    def gpus(self) -> list[str]:
        """Every device name the store can answer for: the catalog plus registered ones."""
        extra = sorted({g for g, _, _ in self._registered} - set(gpu_names()))
        return [*gpu_names(), *extra]

    def models(self, gpu: str) -> list[str]:
        """Models the store can answer for on `gpu` (catalog models only on catalogued GPUs)."""
        base = model_names() if gpu in gpu_names() else []
        extra = sorted({m for g, m, _ in self._registered if g == gpu} - set(base))
        return [*base, *extra]

    def get(self, gpu: str, model: str, tensor_parallel: int | None = None) -> HardwareProfile:
        """The profile of `model` on `tensor_parallel` x `gpu` (registered first, then default).

        Raises ProfileLookupError naming the field (gpu, model or tensor_parallel) that has none.
        """
        self._check_names(gpu, model)
        tp = self._resolve_tp(gpu, model, tensor_parallel)
        key = (gpu, model, tp)
        hit = self._registered.get(key)
        if hit is not None:
            return hit
        if key not in self._derived:
            self._derived[key] = default_profile(gpu, model, tp, params=self.roofline)
        return self._derived[key]

    def estimate(
        self,
        request: Request,
        prediction: SupportsMeanTokens,
        gpu: str,
        tensor_parallel: int | None = None,
    ) -> Estimate:
        """Prefill, per-token decode and KV estimates of `request` on `gpu` (module docstring)."""
        mean = float(prediction.mean_tokens)
        if not (math.isfinite(mean) and mean >= 0):
            raise ValueError(f"prediction.mean_tokens must be finite and >= 0, got {mean}")
        mean = min(mean, float(request.max_tokens))
        profile = self.get(gpu, request.model, tensor_parallel)
        inp = request.input_tokens
        return Estimate(
            prefill_s=profile.prefill_time_s(1, inp),
            decode_s_per_token=profile.decode_time_s(inp + mean / 2.0, 1),
            kv_bytes=math.ceil((inp + mean) * profile.kv_bytes_per_token),
            profile_source=profile.source,
        )

    def _check_names(self, gpu: str, model: str) -> None:
        gpus = self.gpus()
        if gpu not in gpus:
            raise ProfileLookupError(
                "gpu",
                gpu,
                gpus,
                f"'{gpu}' is not in the profile catalog and has no registered profile "
                "(register one with ProfileStore.put(); CPU replicas use gpu 'cpu')",
            )
        models = self.models(gpu)
        if model not in models:
            where = "in the profile catalog" if gpu in gpu_names() else "registered"
            raise ProfileLookupError(
                "model",
                model,
                models,
                f"no profile for model '{model}' on gpu '{gpu}': it is neither {where} nor "
                "registered for this gpu (register one with ProfileStore.put())",
            )

    def _registered_tps(self, gpu: str, model: str) -> list[int]:
        return sorted(t for g, m, t in self._registered if g == gpu and m == model)

    def _resolve_tp(self, gpu: str, model: str, tensor_parallel: int | None) -> int:
        registered = self._registered_tps(gpu, model)
        derivable = gpu in gpu_names() and model in model_names()
        if tensor_parallel is None:
            if derivable:
                try:
                    return smallest_fitting_tp(gpu, model, self.roofline)
                except ValueError as exc:
                    if not registered:
                        raise ProfileLookupError("tensor_parallel", "auto", [], str(exc)) from exc
            return registered[0]
        tp = tensor_parallel
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ProfileLookupError(
                "tensor_parallel", tp, registered, "tensor_parallel must be an int >= 1"
            )
        if tp in registered:
            return tp
        if derivable:
            g, m = gpu_spec(gpu), model_spec(model)
            if m.attention_heads % tp == 0 and fits(g, m, tp, self.roofline):
                return tp
            fitting = [
                t for t in TP_CHOICES if m.attention_heads % t == 0 and fits(g, m, t, self.roofline)
            ]
            valid = sorted(set(fitting) | set(registered))
            if m.attention_heads % tp != 0:
                detail = f"tp must divide the {m.attention_heads} attention heads of {model}"
            else:
                detail = f"{model} does not fit on {tp} x {gpu} (weights + KV reserve)"
        else:
            valid = registered
            detail = f"only registered profiles exist for {model} on '{gpu}'"
        raise ProfileLookupError("tensor_parallel", tp, valid, detail)
