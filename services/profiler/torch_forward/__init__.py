"""Forward-pass profiler: time a random-weight Llama in PyTorch + transformers and compare the
fitted step-time profile with the roofline one (shared/README.md, "Hardware profile").

Shell package: torch and transformers are imported inside the functions that need them, so the
pure parts (shapes, grids, FLOP/byte accounting, profiles, the report) import without them.

  * shapes.py: the Llama shapes, catalog GPU names and measurement grids.
  * timing.py, measure.py, static_decode.py: what is measured and how (torch); decode on a
    static cache replayed from a CUDA graph, as a serving engine runs it.
  * profile.py: FLOP/byte accounting, the fitted and the roofline profiles.
  * compare.py: the two profiles point by point and the efficiency the run implies.
  * report.py: the markdown report and the profile file's "report".

Known differences from a serving engine, all of which make the measured steps slower than a vLLM
step: eager PyTorch (no CUDA graphs, so kernel launches are paid on the CPU every step), HF's
`DynamicCache` appends with torch.cat (each decode step copies the whole KV cache once more), and
prompts are padded-free but not packed across requests (N x L, not a varlen batch).
"""

from services.profiler.torch_forward.compare import Comparison, PointComparison, compare
from services.profiler.torch_forward.measure import (
    Measurement,
    ModelFacts,
    Progress,
    llama_config,
    measure,
)
from services.profiler.torch_forward.profile import (
    CPU_KV_CAPACITY_BYTES,
    FittedProfile,
    decode_bytes,
    default_kv_capacity_bytes,
    fitted_profile,
    prefill_flops,
    roofline_profile,
    source_label,
)
from services.profiler.torch_forward.report import render_report, report_dict
from services.profiler.torch_forward.shapes import (
    DEFAULT_GPU,
    DTYPE_BYTES,
    LLAMA_31_8B,
    SHAPES,
    TINY,
    Dtype,
    ForwardShape,
    Grid,
    default_grid,
    grid_points,
    resolve_gpu,
    shape_named,
)
from services.profiler.torch_forward.static_decode import (
    DECODE_MODES,
    StaticStep,
    prepare_static_step,
)
from services.profiler.torch_forward.timing import measure_copy_bytes_s

__all__ = [
    "CPU_KV_CAPACITY_BYTES",
    "DECODE_MODES",
    "DEFAULT_GPU",
    "DTYPE_BYTES",
    "LLAMA_31_8B",
    "SHAPES",
    "TINY",
    "Comparison",
    "Dtype",
    "FittedProfile",
    "ForwardShape",
    "Grid",
    "Measurement",
    "ModelFacts",
    "PointComparison",
    "Progress",
    "StaticStep",
    "compare",
    "decode_bytes",
    "default_grid",
    "default_kv_capacity_bytes",
    "fitted_profile",
    "grid_points",
    "llama_config",
    "measure",
    "measure_copy_bytes_s",
    "prefill_flops",
    "prepare_static_step",
    "render_report",
    "report_dict",
    "resolve_gpu",
    "roofline_profile",
    "shape_named",
    "source_label",
]
