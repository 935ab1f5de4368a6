"""The docs and shipped campaign files stay true to the code."""
from __future__ import annotations

from pathlib import Path

import pytest

from gapfuzz.fuzzer.config.campaign import default_campaign_path, load_campaign
from gapfuzz.results.schema import COLUMNS

REPO = Path(__file__).resolve().parent.parent


def test_every_column_is_documented():
    text = (REPO / "docs" / "results.md").read_text()
    missing = [c for c in COLUMNS if f"`{c}`" not in text]
    assert not missing, f"docs/results.md lacks {missing}"


@pytest.mark.parametrize("path", sorted((REPO / "campaigns").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_campaigns_are_valid(path):
    load_campaign(path)


def test_a_campaign_that_states_its_counts_plans_them():
    """A shipped campaign's header that says "about N variants and M pairs" is what ``run --check`` plans."""
    import re

    from gapfuzz.fuzzer.config.plan import pair_counts, select_seeds, sized_seeds, variant_count

    checked = []
    for path in sorted((REPO / "campaigns").glob("*.yaml")):
        header = " ".join(line.lstrip("# ") for line in path.read_text().splitlines() if line.startswith("#"))
        stated = re.search(r"about ([\d,]+) variants and ([\d,]+) pairs", header, re.IGNORECASE)
        if stated is None:
            continue
        c = load_campaign(path)
        seeds = sized_seeds(c, select_seeds(c))
        planned = (sum(variant_count(c, s) for s in seeds) * len(c.modes), sum(pair_counts(c, seeds).values()))
        assert planned == tuple(int(n.replace(",", "")) for n in stated.groups()), (path.name, planned)
        checked.append(path.name)
    assert {"example.yaml", "stacks.yaml"} <= set(checked)


def test_default_campaign_is_the_shipped_one():
    assert (REPO / "campaigns" / "default.yaml").read_text() == default_campaign_path().read_text()


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    command = 'pip install -e ".[all,test]" && ruff check . && python -m pytest'
    assert command in readme and command in ci
