"""How `kernelfarm job` / `tune` word a job's warm-start prior (the API's ``warm_start_prior``)."""

from __future__ import annotations

import pytest
from rich.console import Console

from kernelfarm.commands.jobs import describe_prior


@pytest.mark.parametrize(
    ("state", "says"),
    [
        ("in_use", "warm start: 120 trials from nvidia-a100, nvidia-h100 (used)"),
        ("held_back", "(held back: the job's own measurements had not yet shown that they rank its configs alike)"),
        ("dropped", "(dropped: the job's own measurements disagreed with them)"),
    ],
)
def test_each_state_in_words(state: str, says: str) -> None:
    prior = {"trials": 120, "sources": ["nvidia-a100", "nvidia-h100"], "state": state}
    assert says in describe_prior(prior)


def test_a_cold_start_and_a_source_that_looks_like_markup() -> None:
    assert describe_prior({"trials": 0, "sources": [], "state": "none"}).startswith("cold start: no other GPU")
    console = Console(record=True, width=200)
    console.print(describe_prior({"trials": 1, "sources": ["[red]x[/]"], "state": "in_use"}), highlight=False)
    assert "from [red]x[/] (used)" in console.export_text()  # printed as sent, not as rich markup
