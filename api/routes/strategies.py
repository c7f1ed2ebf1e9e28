"""The search strategies a job may name."""

from __future__ import annotations

from fastapi import APIRouter

from kernelfarm.api.deps import ReadToken
from kernelfarm.api.insight_schemas import StrategiesPublic
from kernelfarm.core.strategy_names import DEFAULT_STRATEGY, STRATEGY_NAMES

router = APIRouter(prefix="/v1", tags=["jobs"])


@router.get("/strategies", response_model=StrategiesPublic)
async def strategies(_: ReadToken) -> StrategiesPublic:
    return StrategiesPublic(names=list(STRATEGY_NAMES), default=DEFAULT_STRATEGY)
