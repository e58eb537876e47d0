import frontdesk_weather
import pytest

from frontdesk.testing import Frontdesk


@pytest.fixture(autouse=True)
def _no_weather_variables(monkeypatch):
    # The settings come from FRONTDESK_WEATHER_*: a developer's own must not change the tests.
    for name in ("UNITS", "SERVICE_URL", "CACHE_MINUTES", "EVENTS_FILE"):
        monkeypatch.delenv(f"FRONTDESK_WEATHER_{name}", raising=False)


@pytest.fixture
async def desk():
    """A temporary frontdesk with the weather plugin and the built-in desks."""
    async with Frontdesk(plugins={"weather": frontdesk_weather}) as desk:
        yield desk
