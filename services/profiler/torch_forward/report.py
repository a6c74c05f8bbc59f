"""Report of the forward-pass profiler (pure): the markdown comparison and the profile file's
"report" dict."""

from __future__ import annotations

from typing import Any

from services.profiler.torch_forward.compare import Comparison
from shared.report.table import markdown_table


def _sci(v: float) -> str:
    return f"{v:.3e}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "-"


def _steps_table(
    c: Comparison, phase: str, x_name: str, unit: str, scale: float, peak: float, peak_name: str
) -> str:
    """The per-point table of one phase: achieved work/s in `unit` (work / scale) and as a
    percentage of `peak` (the GPU's `peak_name`)."""
    rows = [
        [
            str(p.n),
            f"{p.x:g}",
            f"{p.measured_s * 1e3:.3f}",
            f"{p.fitted_s * 1e3:.3f}",
            f"{p.roofline_s * 1e3:.3f}",
            f"{p.ratio:.2f}",
            f"{p.achieved / scale:.3g}",
            f"{100 * p.achieved / peak:.3g}",
        ]
        for p in c.phase(phase)
    ]
    headers = [
        "N",
        x_name,
        "measured ms",
        "fit ms",
        "roofline ms",
        "measured/roofline",
        f"achieved {unit}",
        f"% of {c.gpu.name} {peak_name}",
    ]
    return markdown_table(headers, rows, left=())


def render_report(c: Comparison, profile_path: str | None = None) -> str:
    """The markdown comparison report."""
    m = c.measurement
    fp = c.fitted.profile
    rp = c.roofline
    g = c.gpu
    f = m.facts
    rp_params = c.roofline_params
    cpu_note = m.device != "cuda"
    title = f"# Forward-pass profile vs roofline: {m.shape.model} on {m.device} ({m.device_name})"
    where = f", written to `{profile_path}`" if profile_path else ""
    lines = [
        title,
        "",
        f"- measured profile: `{fp.source}` (gpu `{fp.gpu}`, tp 1{where})",
        f"- roofline profile: `{rp.source}` (gpu `{rp.gpu}`, model `{rp.model}`, "
        f"tp {rp.tensor_parallel})",
        f"- model: {m.shape.name} shape, {f.params:,} parameters, {f.weight_bytes / 1e9:.3f} GB "
        f"of {m.dtype} weights, {f.kv_bytes_per_token:,} KV bytes/token, random weights, SDPA",
        f"- timing: median of {m.grid.repeats} after {m.grid.warmup} warm-up calls, wall clock "
        f"with device synchronisation; torch {m.versions.get('torch', '?')}, transformers "
        f"{m.versions.get('transformers', '?')}",
        f"- decode steps: {m.decode_mode}",
        f"- build (random init on device): {m.build_s:.2f} s -> cold_load "
        f"{fp.cold_load_bytes_s / 1e9:.3g} GB/s; "
        f"{'pinned host->device' if not cpu_note else 'host memory'} copy "
        f"{m.swap_bytes_s / 1e9:.3g} GB/s -> swap_bytes_s",
        f"- KV capacity recorded: {fp.kv_capacity_bytes / 2**30:.2f} GiB "
        f"({fp.kv_capacity_tokens:,} tokens)",
    ]
    if cpu_note:
        lines += [
            "",
            f"> CPU run: the roofline columns are for {g.name}, so measured/roofline is the "
            f"CPU-to-{g.name} gap, not an error of the roofline, and the efficiency percentages "
            f"are of {g.name}'s datasheet peaks.",
        ]
    coeff_rows = []
    for name, mv, rv in (
        ("p1 (s per request·token)", fp.prefill.p1, rp.prefill.p1),
        ("p2 (s per request)", fp.prefill.p2, rp.prefill.p2),
        ("p3 (s per token of L)", fp.prefill.p3, rp.prefill.p3),
        ("p4 (s fixed)", fp.prefill.p4, rp.prefill.p4),
        ("d1 (s per request·context token)", fp.decode.d1, rp.decode.d1),
        ("d2 (s per request)", fp.decode.d2, rp.decode.d2),
        ("d3 (s per context token)", fp.decode.d3, rp.decode.d3),
        ("d4 (s fixed)", fp.decode.d4, rp.decode.d4),
    ):
        coeff_rows.append([name, _sci(mv), _sci(rv), _ratio(mv, rv)])
    pf, df = c.fitted.prefill_fit, c.fitted.decode_fit
    lines += [
        "",
        "## Coefficients",
        "",
        markdown_table(
            ["coefficient", "measured (fit)", "roofline", "measured/roofline"], coeff_rows
        ),
        "",
        f"Fit: prefill RMSE {pf.rmse_s * 1e3:.3f} ms, R² {pf.r2:.4f} ({pf.samples} samples); "
        f"decode RMSE {df.rmse_s * 1e3:.3f} ms, R² {df.r2:.4f} ({df.samples} samples).",
        "",
        "## Prefill steps",
        "",
        _steps_table(c, "prefill", "L", "TFLOP/s", 1e12, g.peak_flops, "peak"),
        "",
        "## Decode steps",
        "",
        _steps_table(c, "decode", "context", "GB/s", 1e9, g.hbm_bytes_s, "HBM"),
        "",
        "## Implied efficiency factors",
        "",
        f"- prefill: best achieved {max(p.achieved for p in c.phase('prefill')) / 1e12:.3g} "
        f"TFLOP/s = {100 * c.prefill_efficiency:.3g}% of {g.name}'s {g.peak_flops / 1e12:g} "
        f"TFLOP/s dense BF16 peak (the roofline assumes eff_compute = {rp_params.eff_compute:g}); "
        f"median measured/roofline {c.prefill_ratio_median:.2f}",
        f"- decode: best achieved {max(p.achieved for p in c.phase('decode')) / 1e9:.3g} GB/s "
        f"= {100 * c.decode_efficiency:.3g}% of {g.name}'s {g.hbm_bytes_s / 1e12:g} TB/s HBM "
        f"(the roofline assumes eff_mem = {rp_params.eff_mem:g}); median measured/roofline "
        f"{c.decode_ratio_median:.2f}",
        "- FLOPs count 2 per layer weight per prompt token, the LM head on the last position and "
        "causal attention; bytes count every weight but the input-embedding table once plus the "
        "KV of N·context tokens (DynamicCache's extra torch.cat copy is not counted as useful).",
        "",
    ]
    return "\n".join(lines)


def report_dict(c: Comparison) -> dict[str, Any]:
    """The profile file's "report": what was run, the fit quality and every compared point."""
    m = c.measurement
    return {
        "kind": "torch-forward",
        "shape": m.shape.name,
        "device": m.device,
        "device_name": m.device_name,
        "dtype": m.dtype,
        "versions": dict(m.versions),
        "grid": {"warmup": m.grid.warmup, "repeats": m.grid.repeats},
        "build_s": m.build_s,
        "swap_bytes_s": m.swap_bytes_s,
        "params": m.facts.params,
        "prefill_fit": {
            "rmse_s": c.fitted.prefill_fit.rmse_s,
            "r2": c.fitted.prefill_fit.r2,
            "samples": c.fitted.prefill_fit.samples,
        },
        "decode_fit": {
            "rmse_s": c.fitted.decode_fit.rmse_s,
            "r2": c.fitted.decode_fit.r2,
            "samples": c.fitted.decode_fit.samples,
        },
        "roofline_gpu": c.gpu.name,
        "roofline_source": c.roofline.source,
        "prefill_efficiency": c.prefill_efficiency,
        "decode_efficiency": c.decode_efficiency,
        "points": [
            {
                "phase": p.phase,
                "n": p.n,
                "x": p.x,
                "measured_s": p.measured_s,
                "fitted_s": p.fitted_s,
                "roofline_s": p.roofline_s,
                "ratio": p.ratio,
                "work": p.work,
            }
            for p in c.points
        ],
    }
