"""Every registered stage plugin has its README (what it does and its equation, beside the other
plugins of its stage in slomesh/stacks/plugin_docs/<stage>/<plugin>/) and rows in the table test
(test_plugin_table.py), at least one of them a fragment it contributes; no README outlives its
plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

from slomesh.stacks.stages import REGISTRIES, Fragment
from tests.unit.stacks.test_plugin_table import ROWS

DOCS = Path(__file__).resolve().parents[3] / "slomesh" / "stacks" / "plugin_docs"
PLUGINS = [(stage, name) for stage, reg in REGISTRIES.items() for name in reg.names()]


def _equation(text: str) -> str:
    """The fenced block under the README's `## Equation` heading ("" when there is none)."""
    _, _, after = text.partition("\n## Equation\n")
    parts = after.split("```")
    return parts[1].strip() if len(parts) >= 3 else ""


@pytest.mark.parametrize(("stage", "name"), PLUGINS, ids=[f"{s}/{n}" for s, n in PLUGINS])
def test_plugin_has_readme_with_equation_and_table_rows(stage: str, name: str) -> None:
    readme = DOCS / stage / name / "README.md"
    assert readme.is_file(), f"write {readme.relative_to(DOCS.parents[2])}"
    text = readme.read_text()
    assert text.startswith(f"# `{name}` ({stage})\n"), "title: # `<plugin>` (<stage>)"
    assert _equation(text), f"{readme}: a `## Equation` section with a fenced equation"
    rows = [r for r in ROWS if (r[0], r[1]) == (stage, name)]
    assert any(isinstance(r[4], Fragment) for r in rows), f"add {stage}/{name} rows to the table"


def test_no_readme_without_a_plugin() -> None:
    documented = {(p.parent.parent.name, p.parent.name) for p in DOCS.glob("*/*/README.md")}
    assert documented - set(PLUGINS) == set()


def test_equation_reader() -> None:
    assert _equation("# x\n\n## Equation\n\n```\na = b\n```\n") == "a = b"
    assert _equation("# x\n\n## Equation\n\nno block\n") == ""
    assert _equation("# x\n\n```\na = b\n```\n") == ""
