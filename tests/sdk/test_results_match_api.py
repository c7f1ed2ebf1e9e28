"""The SDK's result models (kernelfarm/sdk/results.py) against the API's schemas (api/schemas.py).

The API's schemas are the source of truth; the SDK keeps its own models on purpose: a client must keep
reading a newer or older farm (unknown fields ignored, plain strings where the server validates an enum
or a UUID, frozen values), and the API layer may not import the client's. So this test is what keeps them
one contract: every field the SDK reads is one the API sends, of a JSON type the SDK accepts. A field
the SDK reads that the API renames, removes or retypes fails here, not in a user's code; a field the API
adds, or one the SDK stops reading, passes (the SDK reads a subset on purpose).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, create_model

from kernelfarm.api import schemas as api
from kernelfarm.sdk import results as sdk

# SDK model -> the API schema of the answer it reads.
PAIRS: dict[type[BaseModel], type[BaseModel]] = {
    sdk.Job: api.JobPublic,
    sdk.Progress: api.Progress,
    sdk.BestSoFar: api.BestSoFar,
    sdk.Trial: api.TrialPublic,
    sdk.BestConfig: api.BestPublic,
    sdk.Kernel: api.KernelPublic,
    sdk.WarmStartPrior: api.WarmStartPrior,
    sdk.ParetoPoint: api.ParetoPoint,
}
REF_PAIRS = {client.__name__: server.__name__ for client, server in PAIRS.items()}


def json_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property schema allows; a nested model is ``ref:<name>``."""
    if "anyOf" in schema:
        return set().union(*(json_types(option) for option in schema["anyOf"]))
    if "$ref" in schema:
        return {"ref:" + schema["$ref"].rsplit("/", 1)[-1]}
    if "type" in schema:
        return {schema["type"]}
    return {"any"}  # Any: every type


def accepts(client: set[str], server: set[str]) -> bool:
    """Does a property the SDK types as ``client`` read every value the API may send as ``server``?"""
    if "any" in client:
        return True
    widened = client | ({"integer"} if "number" in client else set())
    refs = {f"ref:{REF_PAIRS.get(t[4:], t[4:])}" for t in client if t.startswith("ref:")}
    return server <= widened | refs


def drift(client: type[BaseModel], server: type[BaseModel]) -> list[str]:
    """What the SDK model reads that the API model does not send (as the SDK would read it)."""
    theirs = server.model_json_schema(mode="serialization")["properties"]
    problems = []
    for name, schema in client.model_json_schema()["properties"].items():
        if name not in theirs:
            problems.append(f"{client.__name__}.{name}: not in {server.__name__}")
            continue
        mine, sent = json_types(schema), json_types(theirs[name])
        if not accepts(mine, sent):
            problems.append(f"{client.__name__}.{name}: reads {sorted(mine)}, {server.__name__} sends {sorted(sent)}")
        for nested in ("items", "additionalProperties"):
            if isinstance(schema.get(nested), dict) and isinstance(theirs[name].get(nested), dict):
                inner, sent = json_types(schema[nested]), json_types(theirs[name][nested])
                if not accepts(inner, sent):
                    problems.append(f"{client.__name__}.{name} {nested}: reads {sorted(inner)}, sent {sorted(sent)}")
    return problems


@pytest.mark.parametrize("client", list(PAIRS), ids=lambda model: model.__name__)
def test_every_sdk_field_is_one_the_api_sends(client: type[BaseModel]) -> None:
    assert drift(client, PAIRS[client]) == []


def test_a_drifted_sdk_model_is_reported() -> None:
    renamed = create_model("Progress", total=(int, ...), done=(int, ...))
    retyped = create_model("BestSoFar", trial_id=(int, ...), config_key=(int, ...))
    assert drift(renamed, api.Progress) == ["Progress.done: not in Progress"]
    assert drift(retyped, api.BestSoFar) == ["BestSoFar.config_key: reads ['integer'], BestSoFar sends ['string']"]
    # an integer the API sends is a number the SDK reads; a float it sends is not an SDK integer
    assert accepts({"number"}, {"integer"}) and not accepts({"integer"}, {"number"})
