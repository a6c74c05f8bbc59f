"""Hardware profile: fitted step-time coefficients plus memory and links (shared/README.md).

Prefill of N requests packed/padded to length L (SCLS Eq. 4, plus an attention term):
    T_prefill(N, L) = p1·N·L + p2·N + p3·L + p4 + p5·N·L²
p5 is attention's cost, quadratic in a sequence's length (SCLS Eq. 4 has none; on the CPU build
of vLLM one 1,024-token prompt costs 1.6x four 300-token prompts, which a linear model cannot
express). In a continuous-batching step the term is p5·Σ c·(k + c) over prefill chunks of c new
tokens on k cached ones (each new token attends to everything before it).
One decode iteration of N requests with context l (SCLS Eq. 5):
    tau_decode(l, N) = d1·N·l + d2·N + d3·l + d4
Serving a batch for S iterations: T_serve = T_prefill(N, L) + Σ_{k=1..S} tau_decode(L+k, N),
evaluated in closed form below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PrefillCoeffs:
    """Seconds per (request·token), per request, per token of padded length, fixed, and per
    (request·token²) of attention."""

    p1: float
    p2: float
    p3: float
    p4: float
    p5: float = 0.0

    def time_s(self, n: int, length: float) -> float:
        return (
            self.p1 * n * length
            + self.p2 * n
            + self.p3 * length
            + self.p4
            + self.p5 * n * length * length
        )


@dataclass(frozen=True, slots=True)
class DecodeCoeffs:
    """Seconds per (request·context token), per request, per context token, and fixed."""

    d1: float
    d2: float
    d3: float
    d4: float

    def time_s(self, context: float, n: int) -> float:
        return self.d1 * n * context + self.d2 * n + self.d3 * context + self.d4


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """Everything the cores need to predict time and memory for one (GPU type, model, TP) pair.

    source says where the numbers came from: "derived:roofline" or "fitted:<what was measured>".
    """

    gpu: str
    model: str
    tensor_parallel: int
    prefill: PrefillCoeffs
    decode: DecodeCoeffs
    kv_capacity_bytes: int
    kv_bytes_per_token: int
    weight_bytes: int
    swap_bytes_s: float
    cold_load_bytes_s: float
    inefficiency: float = 1.0
    source: str = "derived:roofline"
    submit_overhead_s: float = 0.0
    """Seconds from a request's submission to the engine taking it in (the serving front end:
    tokenisation, inter-process hand-off); measured from the serving engine, 0 when derived."""
    delivery_overhead_s: float = 0.0
    """Seconds from the step that produced a token to the caller seeing it (output processing,
    inter-process hand-off); measured from the serving engine, 0 when derived."""

    def __post_init__(self) -> None:
        if self.kv_capacity_bytes <= 0:
            raise ValueError(
                f"profile.kv_capacity_bytes must be > 0 for {self.model} on {self.gpu}: "
                "the model's weights do not leave room for a KV cache on this instance"
            )
        if self.inefficiency < 1.0:
            raise ValueError(f"profile.inefficiency must be >= 1, got {self.inefficiency}")
        if self.submit_overhead_s < 0 or self.delivery_overhead_s < 0:
            raise ValueError("profile.submit_overhead_s and delivery_overhead_s must be >= 0")

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv_capacity_bytes // self.kv_bytes_per_token

    def prefill_time_s(self, n: int, length: float) -> float:
        return self.prefill.time_s(n, length)

    def decode_time_s(self, context: float, n: int) -> float:
        return self.decode.time_s(context, n)

    def step_time_s(
        self,
        prefill_tokens: int,
        prefill_seqs: int,
        prefill_max_len: int,
        decode_seqs: int,
        decode_context_sum: int,
        prefill_attention: int = 0,
    ) -> float:
        """Duration of one continuous-batching iteration mixing prefill chunks and decodes.

        A decode-only step is exactly tau_decode(mean context, N) (d1·N·l_mean = d1·Σl); a
        prefill-only step is T_prefill with N·L replaced by the packed token count. A mixed step
        adds both and counts the fixed cost (weight read / launch) once: min(p4, d4) is shared.
        prefill_attention is Σ c·(k + c) over the step's prefill chunks (the module docstring).
        """
        t = 0.0
        if decode_seqs > 0:
            mean_ctx = decode_context_sum / decode_seqs
            t += self.decode.time_s(mean_ctx, decode_seqs)
        if prefill_seqs > 0:
            p = self.prefill
            t += p.p1 * prefill_tokens + p.p2 * prefill_seqs + p.p3 * prefill_max_len + p.p4
            t += p.p5 * prefill_attention
            if decode_seqs > 0:
                t -= min(p.p4, self.decode.d4)
        return t

    def serve_time_s(self, n: int, length: int, iterations: int) -> float:
        """T_serve(N, L, S) in closed form: prefill plus S decode steps at contexts L+1..L+S."""
        s = iterations
        ctx_sum = s * length + s * (s + 1) / 2  # Σ_{k=1..S} (L + k)
        d = self.decode
        decode = d.d1 * n * ctx_sum + d.d2 * n * s + d.d3 * ctx_sum + d.d4 * s
        return self.prefill.time_s(n, length) + decode

    def swap_time_s(self, tokens: int) -> float:
        """Time to move `tokens` worth of KV cache across PCIe (either direction)."""
        return tokens * self.kv_bytes_per_token / self.swap_bytes_s

    def batch1_decode_tokens_s(self, context: int) -> float:
        """Tokens per second of a single sequence decoding at `context` tokens."""
        return 1.0 / self.decode.time_s(context, 1)
