"""A HELR device map (UELLM Algorithm 2; deployer README) as vLLM and Ray resources.

- Stages: one pipeline stage per GPU of the map, in map order: pipeline_parallel_size = number of
  GPUs, tensor_parallel_size = 1. (Merging equal GPUs into tensor-parallel groups is not done:
  vLLM needs the same tp in every stage, and the map's greedy split gives stages different
  layer counts, so tp > 1 would only fit maps of identical GPUs.)
- Layers: VLLM_PP_LAYER_PARTITION = the layers of each stage, comma-separated, summing to the
  model's layers (vLLM's get_pp_indices reads it; its Ray executor copies VLLM_* variables to
  the workers).
- Placement group: one {"GPU": 1, "CPU": 1} bundle per stage in map order (bundle 0 also carries
  the replica actor's CPUs). Strategy STRICT_PACK when every stage is on one node; PACK when the
  map spans nodes (STRICT_SPREAD would forbid two stages on one node); with node pinning each
  bundle also asks for its stage's node resource, which makes the layout exact.
- Stage order across nodes: vLLM ranks Ray workers driver node first, then nodes with fewer
  workers, then by IP, keeping bundle order within a node. A map is realised in its own order
  only if each node's stages are contiguous and the later nodes come in that order;
  `vllm_order_problem` says when it is not (the map is still emitted; the CLI warns).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby, pairwise
from typing import Any

PP_PARTITION_ENV = "VLLM_PP_LAYER_PARTITION"


def pp_layer_partition(layers: Sequence[int]) -> str:
    """VLLM_PP_LAYER_PARTITION for stages holding `layers` layers each ("41,39")."""
    if not layers or any(n < 1 for n in layers):
        raise ValueError(f"every pipeline stage needs >= 1 layer, got {list(layers)}")
    return ",".join(str(n) for n in layers)


def placement_group_strategy(stage_nodes: Sequence[str]) -> str:
    """STRICT_PACK on one node, PACK across nodes (module docstring)."""
    return "STRICT_PACK" if len(set(stage_nodes)) <= 1 else "PACK"


def stage_bundles(
    stage_nodes: Sequence[str], actor_cpus: float, pin_prefix: str | None
) -> list[dict[str, Any]]:
    """One GPU bundle per stage in map order; bundle 0 holds the replica actor's CPUs."""
    bundles: list[dict[str, Any]] = []
    for i, node in enumerate(stage_nodes):
        b: dict[str, Any] = {"GPU": 1, "CPU": max(1.0, actor_cpus) if i == 0 else 1}
        if pin_prefix is not None:
            b[f"{pin_prefix}{node}"] = 0.001
        bundles.append(b)
    return bundles


def vllm_order_problem(stage_nodes: Sequence[str]) -> str | None:
    """Why vLLM's Ray executor may run the stages in another order than the map, or None."""
    runs = [(node, len(list(g))) for node, g in groupby(stage_nodes)]
    nodes = [n for n, _ in runs]
    if len(nodes) != len(set(nodes)):
        return f"stages of one node are not contiguous ({' -> '.join(nodes)}); vLLM groups them"
    later = [count for _, count in runs[1:]]
    if any(a >= b for a, b in pairwise(later)):
        return (
            "after the first node, vLLM orders nodes by fewer workers then IP; "
            f"stage counts {later} may be reordered"
        )
    return None
