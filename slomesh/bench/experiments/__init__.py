"""The QLM paper's experiments (SoCC'24 §8, Figs. 9-20) as named, seeded bench runs.

`slomesh bench --scenario <name>` runs one: it writes results.json, summary.md and PNG figures
shaped like the paper's into runs/<name> (or --out) and prints the tables. Each experiment lives
in its own module; shared pieces (running stacks, sweeping a stream's rate, tables, figures) are
in `slomesh.bench.experiments.helpers`.
"""

from __future__ import annotations

from shared.policy import Registry
from slomesh.bench.experiments.autoscale_diurnal import AutoscaleDiurnal
from slomesh.bench.experiments.base import Experiment, ExperimentArgs, ExperimentOutput
from slomesh.bench.experiments.lengths_prompts import LengthsPrompts
from slomesh.bench.experiments.qlm_ablation_wa import QLMAblationWA
from slomesh.bench.experiments.qlm_ablation_wb import QLMAblationWB
from slomesh.bench.experiments.qlm_delta import QLMDelta
from slomesh.bench.experiments.qlm_hetero import QLMHetero
from slomesh.bench.experiments.qlm_rwt import QLMRWT
from slomesh.bench.experiments.qlm_rwt_live import QLMRWTLive
from slomesh.bench.experiments.qlm_solver import QLMSolver
from slomesh.bench.experiments.qlm_wa_rates import QLMWARates
from slomesh.bench.experiments.qlm_wb_rates import QLMWBRates

EXPERIMENTS: Registry[Experiment] = Registry(
    "experiment",
    {
        cls.name: cls
        for cls in (
            QLMWARates,
            QLMWBRates,
            QLMAblationWA,
            QLMAblationWB,
            QLMHetero,
            QLMRWT,
            QLMRWTLive,
            QLMDelta,
            QLMSolver,
            LengthsPrompts,
            AutoscaleDiurnal,
        )
    },
)

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentArgs", "ExperimentOutput"]
