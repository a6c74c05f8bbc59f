"""The cluster core's decisions as data: the builder, the output and the projected views."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.scheduler.core.cluster_view import PendingChange, RequestState, WorkItem
from services.scheduler.core.decisions import Decisions
from services.scheduler.core.output import Eviction, Placement, Resume
from services.scheduler.core.projection import Projected
from shared.domain import SLO, HardwareProfile, Request
from shared.domain.engine import EngineStatus, SliceEntry
from tests.unit.scheduler.conftest import make_profile


def _req(rid: str, criticality: int = 0) -> Request:
    return Request(
        rid, "m", 100, 50, 0.0, SLO(10.0), true_output_tokens=20, criticality=criticality
    )


@dataclass
class _View:
    """A read-only instance holding `held` (id -> state), counted the simulator's way."""

    name: str = "a"
    held: dict[str, RequestState] = field(default_factory=dict)
    token_budget: int = 8192
    max_num_seqs: int = 8

    @property
    def gpu(self) -> str:
        return "g"

    def serves(self, model: str) -> bool:
        return model == "m"

    def profile(self, model: str) -> HardwareProfile:
        return make_profile(model, weight_bytes=10**9, swap_bytes_s=1e10)

    def status(self) -> EngineStatus:
        return self.status_after(PendingChange())

    def status_after(self, change: PendingChange) -> EngineStatus:
        n = {s: sum(v == s for v in self.held.values()) for s in ("waiting", "running", "evicted")}
        return EngineStatus(
            "m",
            n["waiting"] + change.added - change.evicted_waiting,
            n["running"] - change.evicted_running,
            n["evicted"] + change.evicted_waiting + change.evicted_running - change.resumed,
            0,
            100,
            change.output_tokens,
            change.prefill_tokens,
        )

    def work_items(self) -> list[WorkItem]:
        return []

    def holds(self, request_id: str) -> RequestState | None:
        return self.held.get(request_id)

    def load_time_s(self, model: str) -> float:
        return 0.0 if model == "m" else 1.0


def test_a_placement_shows_in_the_projected_view_until_the_next_event() -> None:
    view = _View(held={"x": "running"})
    out = Decisions(5.0)
    proj = Projected(view, lambda: out)
    assert proj.status().waiting == 0
    out.place(_req("r1"), proj)
    out.place(_req("r2"), "a")
    st = proj.status()
    assert (st.waiting, st.running, st.pending_prefill_tokens) == (2, 1, 200)
    assert st.outstanding_output_tokens == 40  # the true lengths, capped by max_tokens
    assert [w.prefill_tokens for w in proj.work_items()] == [100, 100]
    assert proj.holds("r1") == "waiting" and view.holds("r1") is None
    result = out.build(queued=["q"])
    assert [p.request.request_id for p in result.placements] == ["r1", "r2"]
    assert result.queued == ("q",) and result.placed_on("r2") == "a"
    out = Decisions(6.0)  # the next event: the instance now holds what was applied
    assert proj.status().waiting == 0


def test_evict_takes_only_requests_in_service_and_resume_only_evicted_ones() -> None:
    view = _View(held={"run": "running", "wait": "waiting", "gone": "evicted", "full": "done"})
    out = Decisions(1.0)
    proj = Projected(view, lambda: out)
    out.place(_req("new"), proj)
    done = out.evict(proj, ["run", "wait", "gone", "full", "nope", "new", "run"])
    assert done == ["run", "wait", "new"]
    st = proj.status()
    assert (st.waiting, st.running, st.evicted) == (0, 0, 4)
    assert out.evict(proj, ["run"]) == []  # already evicted by this event
    assert out.resume(proj, ["run", "wait", "gone"]) == ["run", "wait", "gone"]
    assert proj.status().waiting == 3
    result = out.build()
    kinds = [type(a) for a in result.ordered()]
    assert kinds == [Placement, Eviction, Resume]
    assert result.evictions[0].request_ids == ("run", "wait", "new")


def test_rejections_carry_drop_reason_and_retry_after() -> None:
    out = Decisions(0.0)
    out.reject(_req("a"), "predicted TTFT too long", 0.0)
    out.reject(_req("b", criticality=-1), "shed: saturated", 0.0)
    out.reject(_req("c"), "queued 60 s", drop_reason="deadline-expired", retry_after_s=0.0)
    result = out.build()
    assert [r.drop_reason for r in result.rejections] == [
        "deadline-infeasible",
        "sheddable-saturated",
        "deadline-expired",
    ]
    rc = result.rejection_of("c")
    assert rc is not None and rc.retry_after_s == 0.0
    assert out.rejected("a") and not out.rejected("z")


def test_batches_carry_slice_budgets_and_prewarm_shortens_load_time() -> None:
    view = _View()
    out = Decisions(0.0)
    proj = Projected(view, lambda: out)
    out.place_batch(proj, [SliceEntry(_req("b1")), SliceEntry(_req("b2"), output_tokens=4)], 8)
    assert proj.status().waiting == 2
    assert out.build().slice_budgets == {"b1": 8, "b2": 8}
    assert proj.load_time_s("other") == 1.0
    out.prewarm(proj, "other")
    assert proj.load_time_s("other") == 0.1  # 1 GB at 10 GB/s from host memory
    assert out.build().swaps[0].kind == "prewarm"
    assert Decisions(0.0).build().empty
