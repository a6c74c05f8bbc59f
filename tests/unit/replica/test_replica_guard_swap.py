"""The TTFT guard turns the waiting head away and the next head needs another model.

Regression (`SimulationStuck` on qlm-wc/qlm-wb with the slomesh stack): the planner
decided "load a model?" before the guard ran, so an idle engine whose hopeless head was rejected
and whose next head belonged to another model planned nothing (IDLE) while work waited, and no
event ever woke it again.
"""

from __future__ import annotations

import pytest

from services.replica.core.outputs import StepKind
from shared.domain.scorpio import ScorpioConfig

CASES = [
    # (id, waiting requests (id, model, ttft s), expected kind, model loaded, rejected)
    (
        "next head needs a swap",
        [("late", "A", 0.01), ("b", "B", 3600.0)],
        "load_model",
        "B",
        ["late"],
    ),
    ("next head same model", [("late", "A", 0.01), ("a", "A", 3600.0)], "execute", None, ["late"]),
    ("nothing rejected, swap", [("b", "B", 3600.0)], "load_model", "B", []),
    ("only the hopeless one", [("late", "A", 0.01)], "idle", None, ["late"]),
]


@pytest.mark.parametrize(
    ("waiting", "kind", "loaded", "rejected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_guard_rejection_then_model_swap(h, waiting, kind, loaded, rejected):
    profiles = {m: h.profile(4096, model=m) for m in "AB"}
    core = h.core(profiles=profiles, active="A", scorpio=ScorpioConfig())
    for rid, model, ttft in waiting:
        core.add_request(h.request(rid, 200, 5, model=model, ttft=ttft), 0.0)
    plan = core.schedule(5.0)  # 5 s after arrival: the 10 ms TTFT class is hopeless
    assert plan.kind is StepKind(kind)
    assert plan.load_model == loaded
    assert [seq.request_id for seq, _ in plan.rejected] == rejected
    served = {rid for rid, _, _ in waiting} - set(rejected)
    trace = h.drive(core, t=5.0) if plan.kind is StepKind.IDLE else None
    if plan.kind is not StepKind.IDLE:
        core.update(plan)
        trace = h.drive(core, t=plan.end_s)
    assert set(trace.finished) == served  # every servable request finished: nothing stuck
    assert not core.has_work
