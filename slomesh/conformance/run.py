"""Running the corpus against two servers and tabulating where they differ."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from slomesh.conformance.compare import Answer, answer, differences
from slomesh.conformance.corpus import Case


@dataclass(frozen=True)
class Row:
    """One case's outcome: both answers' statuses and the differences (none: the same)."""

    case: Case
    reference: Answer
    tested: Answer
    diffs: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not self.diffs


def send(client: httpx.Client, base_url: str, case: Case, headers: dict[str, str]) -> Answer:
    """One case to the server at `base_url` (its root, without /v1)."""
    url = base_url.rstrip("/") + case.path
    if case.body is None:
        response = client.get(url, headers=headers)
    else:
        content = case.body if isinstance(case.body, str) else json.dumps(case.body)
        response = client.post(
            url, content=content, headers={"content-type": "application/json", **headers}
        )
    return answer(response.status_code, response.content, case.stream)


def run(
    cases: Iterable[Case],
    reference_url: str,
    tested_url: str,
    headers: dict[str, str] | None = None,
    timeout_s: float = 120.0,
) -> list[Row]:
    """Each case to the reference, then to the tested server, one at a time (so batching
    cannot change a greedy answer), and the differences."""
    rows = []
    extra = headers or {}
    with httpx.Client(timeout=timeout_s) as client:
        for case in cases:
            ref = send(client, reference_url, case, {})
            got = send(client, tested_url, case, extra)
            rows.append(Row(case, ref, got, tuple(differences(ref, got))))
    return rows


def table(rows: list[Row]) -> str:
    """A Markdown table: case, reference status, tested status, same?, first difference."""
    lines = ["| case | reference | tested | same? | difference |", "|---|---|---|---|---|"]
    for row in rows:
        diff = row.diffs[0].replace("|", "\\|") if row.diffs else ""
        mark = "yes" if row.same else "NO"
        lines.append(
            f"| {row.case.name} | {row.reference.status} | {row.tested.status} | {mark} | {diff} |"
        )
    same = sum(r.same for r in rows)
    lines.append(f"\n{same}/{len(rows)} cases answered the same.")
    return "\n".join(lines)
