"""The live scheduler's view in the simulator (slomesh/sim/live_view.py): the policy reads the
scheduler's books, a finish reaches them after its report delay, and the TTFT guard reads the
engines' queues as Status answers taken at the live probe interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.domain import SLO, Request
from shared.domain.engine import EngineConfig
from shared.profiles.io import load_profiles
from slomesh.bench.scenarios import SCENARIOS
from slomesh.sim.cluster import ClusterSpec, InstanceSpec
from slomesh.sim.instance import SimInstance
from slomesh.sim.live_view import LiveTiming, LiveViewConfig
from slomesh.sim.simulator import Simulator
from slomesh.stacks import STACKS

PROFILE = Path(__file__).resolve().parents[3] / "deploy/ray/profiles/cpu-tiny-llama.json"
MODEL = load_profiles(PROFILE)[0].model


def _cluster() -> ClusterSpec:
    inst = InstanceSpec(gpu="cpu", models=[MODEL], count=2, profile_file=str(PROFILE))
    return ClusterSpec(instances=[inst], engine=EngineConfig(max_num_seqs=2))


def _req(rid: str, arrival_s: float, ttft_s: float = 10.0) -> Request:
    return Request(rid, MODEL, 64, 8, arrival_s, SLO(ttft_s, None, class_name="c"))


def _instances(view: LiveViewConfig | None) -> dict[str, str | None]:
    """Where `second` goes when it arrives 50 ms after `first` finished on its engine: the
    least-loaded placer (edf) takes the first of two instances that look alike."""
    stack = STACKS.create("edf")
    first = _req("first", 0.0)
    alone = Simulator(_cluster(), stack, [first]).run().records[0]
    assert alone.finish_s is not None
    second = _req("second", alone.finish_s + 0.05)
    records = Simulator(_cluster(), stack, [first, second], live_view=view).run().records
    return {r.request_id: r.instance for r in records}


@pytest.mark.parametrize(
    ("view", "same_instance"),
    [
        (None, True),  # the engines' state: the first instance is idle again
        (LiveViewConfig(), True),  # the books, reported at once
        (LiveViewConfig(report_delays_s=(0.01,)), True),  # reported before the arrival
        (LiveViewConfig(report_delays_s=(0.2,)), False),  # still in flight in the books
    ],
)
def test_a_finished_request_counts_in_the_books_until_its_report_comes(
    view: LiveViewConfig | None, same_instance: bool
) -> None:
    placed = _instances(view)
    assert (placed["first"] == placed["second"]) is same_instance


def test_the_guard_reads_status_answers_taken_at_the_probe_interval() -> None:
    """scorpio's TTFT guard: under the live view its reports are dated at the probes (a seeded
    phase, then every status_interval_s), not at each arrival as under the engines' view."""
    reqs = [_req(f"r{k}", 0.3 * k, ttft_s=2.0) for k in range(20)]
    stack = STACKS.create("scorpio")
    exact = Simulator(_cluster(), stack, reqs)
    exact.run()
    dates = {r.reported_s for r in exact.scheduler.admission.ttft.reports.values()}
    assert dates == {reqs[-1].arrival_s}
    view = LiveViewConfig(status_interval_s=1.0, seed=3)
    live = Simulator(_cluster(), stack, reqs, live_view=view)
    live.run()
    first = LiveTiming(view).first_probe_s(0.0)
    for report in live.scheduler.admission.ttft.reports.values():
        k = report.reported_s - first
        assert k > reqs[-1].arrival_s - first - 1.0
        assert k == pytest.approx(round(k), abs=1e-9)


def test_the_timing_draws_are_the_measured_delays_and_repeat_with_the_seed() -> None:
    cfg = LiveViewConfig(report_delays_s=(0.02, -0.01, 0.3), status_interval_s=0.5, seed=7)
    a, b = LiveTiming(cfg), LiveTiming(cfg)
    draws = [a.report_delay_s() for _ in range(50)]
    assert draws == [b.report_delay_s() for _ in range(50)]
    assert set(draws) == {0.0, 0.02, 0.3}  # a negative one (clocks) counts as none
    other = LiveTiming(cfg.model_copy(update={"seed": 8}))
    assert [other.report_delay_s() for _ in range(50)] != draws
    assert LiveTiming(LiveViewConfig()).report_delay_s() == 0.0
    assert 10.0 <= LiveTiming(cfg).first_probe_s(10.0) < 10.5


@pytest.mark.parametrize("stack", ["vllm-fcfs", "edf"])
def test_the_books_keep_what_the_probes_answer_as_the_live_shell_does(stack: str) -> None:
    """Each probe's answer reaches the books (LiveReplica.observe): the model the engine serves
    next and the order of its queue, as live Status answers do."""
    sc = SCENARIOS.create("many-models")
    c = Request("c1", "tiny-llama-c", 64, 8, 0.0, SLO(60.0, None, class_name="c"))
    sim = Simulator(sc.cluster, STACKS.create(stack), [c], live_view=LiveViewConfig())
    record = sim.run().records[0]
    books = sim.scheduler.admission.replicas
    engines = {i.name: i.status() for i in sim.instances}
    assert books[str(record.instance)].active_model == "tiny-llama-c"
    assert {n: b.deadline_ordered for n, b in books.items()} == {
        n: st.deadline_ordered for n, st in engines.items()
    }
    assert any(st.deadline_ordered for st in engines.values()) is (stack == "edf")


def test_the_books_of_an_instance_list_its_other_models_as_swap_models() -> None:
    """As a live replica lists its swap_models: the lease book offers a replica that may swap
    no credits (services/scheduler/core/leases.py), the simulated one included."""
    sc = SCENARIOS.create("many-models")
    sim = Simulator(sc.cluster, STACKS.create("serve-multiplex"), [], live_view=LiveViewConfig())
    books = sim.scheduler.admission.replicas
    starts = {i.name: i.status().active_model for i in sim.instances}
    for name, b in books.items():
        assert b.model == starts[name]
        assert set(b.swap_profiles) == set(b.models) - {starts[name]}
        assert set(b.models) == {"tiny-llama", "tiny-llama-b", "tiny-llama-c"}


@pytest.mark.parametrize("stack", ["serve-multiplex", "qlm-recompute"])
def test_a_loads_end_reaches_the_books_at_once_as_the_replica_pushes_it(stack: str) -> None:
    """The probes during the load saw it swapping; the state pushed at its end (as a live
    replica pushes it, services/replica/state_push.py) tells the books at once that the model
    it loaded is active and no swap runs, not at the next probe."""
    sc = SCENARIOS.create("many-models")
    c = Request("c1", "tiny-llama-c", 64, 8, 0.0, SLO(60.0, None, class_name="c"))
    sim = Simulator(sc.cluster, STACKS.create(stack), [c], live_view=LiveViewConfig())
    books = sim.scheduler.admission.replicas
    seen: list[tuple[str, bool, bool]] = []
    during: list[bool] = []
    probe, ended = sim.scheduler.probe, sim.swap_ended

    def probed(now_s: float) -> None:
        probe(now_s)
        during.extend(b.swapping for b in books.values())

    def spy(inst: SimInstance, now_s: float) -> None:
        ended(inst, now_s)
        b = books[inst.name]
        seen.append((str(b.active_model), b.swapping, inst.status().swapping))

    sim.scheduler.probe = probed  # type: ignore[method-assign]
    sim.swap_ended = spy  # type: ignore[method-assign,assignment]
    sim.run()
    assert any(during)  # a probe saw the load run
    assert seen == [("tiny-llama-c", False, False)]
