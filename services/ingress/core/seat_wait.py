"""How long a new request waits for a seat in the engines' running batch, from the streams an
ingress sees.

An engine runs at most `max_num_seqs` requests at once; a request that finds every seat taken
waits, in order, until one frees, and a seat frees when a running request's last token is out.
The ingress cannot see the engines' seats, but it sees its own requests: which stream (first
token out), when each started streaming and how many tokens it asked for, which are still
waiting for their first token, and how fast tokens come (the delivered time per token). With
`seats` the most streams it saw at once lately (its share of the engines' seats; fewer is
harmless below saturation, where no wait is predicted unless the waiting requests fill them),
a running stream's seat frees at `first + (tokens - 1) * tpot`; the requests already waiting
take the first seats that free, each then holding it for its own tokens; the new request gets
the next one.

Pure logic: times are seconds from now.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def seat_wait_s(
    running_left_s: Sequence[float], waiting_hold_s: Sequence[float], seats: int
) -> float:
    """Seconds until a new request gets a seat: `running_left_s` is each running request's time
    until its seat frees (>= 0), `waiting_hold_s` how long each request waiting ahead of it
    (in the order they are served) will hold the seat it gets, `seats` the seats in all."""
    seats = max(seats, len(running_left_s), 1)
    free = [0.0] * (seats - len(running_left_s)) + [max(0.0, t) for t in running_left_s]
    heapq.heapify(free)
    for hold in waiting_hold_s:
        heapq.heappush(free, heapq.heappop(free) + max(0.0, hold))
    return free[0]
