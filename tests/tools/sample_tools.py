"""Decorated tools used by the tests (importable, so entry points can name them)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

import aptix


class Forecast(BaseModel):
    city: str
    high_celsius: float


# The ten-line tool of the docs and the "done when".
@aptix.tool(usage="Call this when the user asks for the weather forecast of a city.")
async def weather_forecast(city: str, days: Annotated[int, Field(ge=1, le=7)] = 1) -> Forecast:
    """Tomorrow's forecast for a city.

    Args:
        city: The city name, e.g. "Lisbon".
        days: How many days ahead, 1 to 7.
    """
    if not city.strip():
        raise aptix.ToolError("Name a city.")
    return Forecast(city=city, high_celsius=20.0 + days)
