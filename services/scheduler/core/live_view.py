"""A live replica as the scheduler's policies see it: counts from admissions and reports.

Implements services.scheduler.core.cluster_view.InstanceView, so the same routers and global
policies that run in the simulator place live requests. No prompt text, no network: the
admission core books here what the cluster core decided (`book*`), and the shell carries out
the evictions, resumes and swaps booked (`take_actions`: Evict / Resume / SwapModel RPCs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from services.scheduler.core.cluster_view import PendingChange, RequestState, WorkItem
from shared.domain import HardwareProfile, Request
from shared.domain.engine import EngineStatus
from shared.domain.swap_order import swap_due


@dataclass(frozen=True, slots=True)
class ReplicaAction:
    """A decision the scheduler's shell must carry out on a replica (Evict / Resume /
    SwapModel RPC)."""

    application: str
    kind: Literal["evict", "resume", "swap"]
    request_ids: tuple[str, ...]
    model: str = ""
    """A swap's model (the replica makes it active once the requests it holds are done)."""


@dataclass
class LiveReplica:
    application: str
    gpu_name: str
    model: str
    profile_: HardwareProfile | None
    token_budget: int = 8192
    max_num_seqs: int = 256
    """Requests the replica's engine runs at once; beyond it, admitted requests wait there."""
    in_flight: dict[str, Request] = field(default_factory=dict)
    evicted: dict[str, Request] = field(default_factory=dict)
    pending: list[ReplicaAction] = field(default_factory=list)
    placed_s: dict[str, float] = field(default_factory=dict)
    """When each in-flight or evicted request was placed here (its admission lease starts)."""
    healthy: bool = True
    """False while the replica does not answer Status: nothing is placed or pulled there."""
    slice_tokens: dict[str, int] = field(default_factory=dict)
    """Slice-level serving: each batch member's token budget for its current slice here."""
    engines: int = 1
    """Engines behind this application: a replica pool's running replicas (autoscaled by Serve;
    services/replica/pool.py). Its admission limit is that many times one replica's."""
    swap_profiles: dict[str, HardwareProfile | None] = field(default_factory=dict)
    """Further models the replica may swap to (its `swap_models`), each with its profile (None:
    none known). A request for one of them placed here waits there until the running ones of
    the active model finish and the replica has swapped (services/replica/model_host.py)."""
    active: str = ""
    """The model the replica serves next (its Status' active_model: while a swap runs, the one
    it loads, as the simulated engine's); "": `model`, the one it starts on."""
    swapping: bool = False
    """The replica's latest Status said a swap runs (to `active`)."""
    adapters: tuple[str, ...] = ()
    """The LoRA adapters the replica reported loaded (its latest state's loaded_adapters),
    least recently used first."""
    deadline_ordered: bool = False
    """The replica's engine queue runs the earliest TTFT deadline first (its latest state's
    `deadline_ordered`): its model host's line follows that order (`blocked`)."""
    swap_ordered: str = ""
    """The model of the scheduler's swap order not yet seen carried out ("": none); cleared
    once Status names it active (the replica keeps an order while it swaps to a third model
    first: shared/domain/swap_order.py)."""
    pushed_s: float = -math.inf
    """When the replica's latest pushed state reached the books (UpdateReplica: a replica
    pushes its state the moment a model swap ends, and every push interval where set)."""

    @property
    def name(self) -> str:
        return self.application

    @property
    def gpu(self) -> str:
        return self.gpu_name

    @property
    def models(self) -> tuple[str, ...]:
        """Every model the replica may serve, the one it starts on first."""
        return (self.model, *self.swap_profiles)

    @property
    def active_model(self) -> str:
        return self.active or self.model

    def serves(self, model: str) -> bool:
        return model == self.model or model in self.swap_profiles

    def profile(self, model: str) -> HardwareProfile:
        p = self.profile_ if model == self.model else self.swap_profiles.get(model)
        if p is None:
            raise ValueError(
                f"no hardware profile for {model} on {self.gpu_name} (replica "
                f"{self.application}): profile it, or use a stack that does not need one"
            )
        return p

    def load_time_s(self, model: str) -> float:
        """0 for the active model; another of its models takes the profile's load time (the
        measured swap: weight_bytes / cold_load_bytes_s); a model it does not serve, never."""
        if model == self.active_model:
            return 0.0
        if not self.serves(model):
            return float("inf")
        p = self.profile(model)
        return p.weight_bytes / p.cold_load_bytes_s

    def observe(
        self,
        active_model: str | None,
        swapping: bool,
        adapters: tuple[str, ...],
        deadline_ordered: bool,
    ) -> None:
        """What the scheduler keeps of the replica's state (live: a Status answer or a pushed
        ReplicaState; simulated: the engine's status at the probe): the model it serves next
        and whether it swaps to it (None: not known, kept as it was), the adapters it holds,
        its queue order."""
        if active_model is not None:
            self.observe_active(active_model, swapping)
        self.adapters = adapters
        self.deadline_ordered = deadline_ordered

    def answer_is_stale(self, asked_s: float) -> bool:
        """A Status answer to a probe sent at `asked_s` is older than the books: a state the
        replica pushed reached them after the probe was sent (the answer may have been taken
        before the push; one taken after it tells the same, and the next probe comes anyway)."""
        return asked_s < self.pushed_s

    def observe_active(self, model: str, swapping: bool = False) -> None:
        """The replica's Status named `model` active (`swapping`: a swap to it runs)."""
        if model and self.serves(model):
            if model == self.swap_ordered:
                self.swap_ordered = ""  # carried out (or being carried out)
            self.active = model
            self.swapping = swapping

    def swap_due(self) -> str:
        """The model this replica swaps to next as the scheduler's books see it ("": none): the
        one a running swap loads; else the engine's rule (shared/domain/swap_order.py) over
        the requests placed here in its line's order: the swap order, unless the first
        request for a model it serves but does not have active wants a third model, which
        then goes first (the replica swaps for it once the active model's requests end)."""
        active = self.active_model
        if self.swapping:
            return active
        requests = list(self.in_flight.values())
        models = [r.model for r in requests]
        order = line_order(self, models, [r.ttft_deadline_abs_s for r in requests])
        blocking = (models[i] for i in order if models[i] != active and self.serves(models[i]))
        head = next(blocking, None)
        return swap_due(self.swap_ordered or None, active, False, head) or head or ""

    def expected_swap_s(self) -> float:
        """The profile's time for the swap due (its model's load time, as load_time_s for a
        model not active); 0 with none due or no profile."""
        model = self.swap_due()
        if not model:
            return 0.0
        try:
            p = self.profile(model)
        except ValueError:  # no profile for it: nothing to expect
            return 0.0
        return p.weight_bytes / p.cold_load_bytes_s

    def status(self) -> EngineStatus:
        return self.status_after(PendingChange())

    def status_after(self, change: PendingChange) -> EngineStatus:
        """In flight beyond `max_num_seqs` counts as waiting, and so, on a replica with several
        models, does every request from the first one placed for a model other than the active
        one on (`blocked`); no KV figures."""
        n = len(self.in_flight) + change.added - change.evicted_waiting - change.evicted_running
        evicted = len(self.evicted) + change.evicted_waiting + change.evicted_running
        placed = [r.model for r in self.in_flight.values()]
        due = [r.ttft_deadline_abs_s for r in self.in_flight.values()]
        late = [math.inf] * len(change.placed_models)  # not booked yet: last in the line
        held = blocked(self, [*placed, *change.placed_models], [*due, *late])
        running = min(max(0, n - held), self.max_num_seqs)
        return EngineStatus(
            active_model=self.active_model,
            waiting=n - running,
            running=running,
            evicted=evicted - change.resumed,
            kv_used_blocks=0,
            kv_total_blocks=0,
            outstanding_output_tokens=sum(r.max_tokens for r in self.in_flight.values())
            + change.output_tokens,
            pending_prefill_tokens=sum(r.input_tokens for r in self.in_flight.values())
            + change.prefill_tokens,
            loaded_adapters=self.adapters,
        )

    def holds(self, request_id: str) -> RequestState | None:
        if request_id in self.in_flight:
            return "running"
        return "evicted" if request_id in self.evicted else None

    def work_items(self) -> list[WorkItem]:
        return [
            WorkItem(r.ttft_deadline_abs_s, True, r.input_tokens, r.input_tokens, r.max_tokens)
            for r in self.in_flight.values()
        ]

    def book(self, request: Request, now_s: float, slice_tokens: int = 0) -> None:
        """`request` was placed here. slice_tokens: a pre-formed batch member's budget for its
        slice (SCLS / SLO-ODBS on a continuous engine): the ingress streams it capped there and
        hands it back unfinished at its slice end (AdmissionCore.resume_slice)."""
        self.in_flight[request.request_id] = request
        self.placed_s[request.request_id] = now_s
        if slice_tokens:
            self.slice_tokens[request.request_id] = slice_tokens

    def forget(self, request_id: str) -> Request | None:
        """Drop a finished (or abandoned) request from this replica's books."""
        self.placed_s.pop(request_id, None)
        self.slice_tokens.pop(request_id, None)
        return self.in_flight.pop(request_id, None) or self.evicted.pop(request_id, None)

    def unheld(self, held: set[str], now_s: float, lease_s: float) -> list[str]:
        """Requests placed here more than `lease_s` ago that the replica does not hold: their
        caller never started (or already ended) the stream, and no report will come."""
        return [
            rid
            for rid in (*self.in_flight, *self.evicted)
            if rid not in held and now_s - self.placed_s.get(rid, now_s) > lease_s
        ]

    def book_eviction(self, request_ids: Sequence[str]) -> list[str]:
        """In-flight requests were taken out of service: booked here, sent by the shell."""
        ids = [r for r in dict.fromkeys(request_ids) if r in self.in_flight]
        for rid in ids:
            self.evicted[rid] = self.in_flight.pop(rid)
        if ids:
            self.pending.append(ReplicaAction(self.application, "evict", tuple(ids)))
        return ids

    def book_resume(self, request_ids: Sequence[str]) -> list[str]:
        """Evicted requests were put back in service (booked here, sent by the shell)."""
        ids = [r for r in dict.fromkeys(request_ids) if r in self.evicted]
        for rid in ids:
            self.in_flight[rid] = self.evicted.pop(rid)
        if ids:
            self.pending.append(ReplicaAction(self.application, "resume", tuple(ids)))
        return ids

    def book_swap(self, model: str) -> None:
        """The policy swapped this replica to `model` (sent by the shell as a SwapModel call)."""
        if not self.serves(model):
            raise ValueError(f"replica {self.application} does not serve model '{model}'")
        # SwapOrder's rule on the replica: a later order replaces one, one back to the active
        # model cancels it
        self.swap_ordered = "" if model == self.active_model else model
        self.pending.append(ReplicaAction(self.application, "swap", (), model))

    def take_actions(self) -> list[ReplicaAction]:
        """The decisions not yet carried out, oldest first; the caller now owns them."""
        actions, self.pending = self.pending, []
        return actions


def blocked(
    replica: LiveReplica, placed: Sequence[str], deadlines: Sequence[float] | None = None
) -> int:
    """How many of the requests placed on `replica` (their models, in placement order, and
    their TTFT deadlines) wait for a swap: a replica with several models runs only its active
    model's requests, and takes them in its line's order (services/replica/model_host.py:
    placement order, or earliest deadline first on a `deadline_ordered` replica; the first
    request for another model holds those behind it), so every request from the first one of a
    model it serves but does not have active on waits, as the simulated engine holds them in
    its waiting queue."""
    if replica.swapping:  # nothing runs while the model loads
        return len(placed)
    active = replica.active_model
    for k, i in enumerate(line_order(replica, placed, deadlines)):
        if placed[i] != active and replica.serves(placed[i]):
            return len(placed) - k
    return 0


def line_order(
    replica: LiveReplica, placed: Sequence[str], deadlines: Sequence[float] | None = None
) -> list[int]:
    """The indexes of the requests placed on `replica` in its line's order: placement order,
    or earliest TTFT deadline first on a `deadline_ordered` replica (stable among equals)."""
    order = list(range(len(placed)))
    if replica.deadline_ordered and deadlines is not None:
        order.sort(key=lambda i: deadlines[i])
    return order
