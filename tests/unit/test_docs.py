"""The documentation: README.md stays short, and the generated configuration reference lists
every field of every configuration model in the source tree (`make docs` builds the site with
`mkdocs build --strict`, which fails on broken links)."""

from __future__ import annotations

import ast
from pathlib import Path

from slomesh.config_reference import NOT_CONFIG, PAGES, collect, pages, ref_of

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("shared", "services", "slomesh")


def source_models() -> set[str]:
    """The "module:Class" of every class in the source tree that derives from pydantic's
    BaseModel, directly or through another such class (by name, to a fixed point)."""
    classes: list[tuple[str, str, list[str]]] = []
    for top in SOURCES:
        for path in (ROOT / top).rglob("*.py"):
            if "rpc/slomesh" in path.as_posix():
                continue
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.ClassDef):
                    bases = [
                        b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases
                    ]
                    classes.append((module, node.name, bases))
    names = {"BaseModel"}
    while True:
        grown = names | {n for _, n, bases in classes if names & set(bases)}
        if grown == names:
            break
        names = grown
    return {f"{m}:{n}" for m, n, bases in classes if names & set(bases)}


def test_readme_is_short() -> None:
    size = (ROOT / "README.md").stat().st_size
    assert size < 25_000, f"README.md is {size} bytes; move detail into docs/"


def test_every_config_model_is_in_the_reference() -> None:
    documented = {ref_of(m) for models in collect().values() for m in models}
    missing = sorted(source_models() - documented - NOT_CONFIG)
    assert not missing, f"add these models to PAGES (slomesh/config_reference.py): {missing}"


def test_every_field_appears_with_its_docstring() -> None:
    rendered = pages()
    for slug, models in collect().items():
        text = rendered[f"configuration/{slug}.md"]
        for model in models:
            section = text.split(f"## {model.__name__} {{#")[1].split("\n## ")[0]
            for name in model.model_fields:
                assert f"| `{name}` |" in section, f"{model.__name__}.{name}"
            assert section.count("\n| `") == len(model.model_fields)


def test_reference_pages_are_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES:
        assert f"configuration/{page.slug}.md" in nav
