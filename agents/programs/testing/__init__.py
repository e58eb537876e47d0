"""``frontdesk.testing``: test a plugin the way frontdesk runs it. Public API, with
``frontdesk.core``; a plugin's tests import nothing else from frontdesk.

(The folder is ``agents/programs/testing``; pyproject.toml maps it to ``frontdesk.testing``. It
sits on top of everything, beside the programs, because it runs calls the way ``frontdesk
simulate`` does.)

::

    from frontdesk.testing import Frontdesk

    async def test_forecast():
        async with Frontdesk(plugins={"weather": frontdesk_weather}) as desk:
            assert desk.errors == []
            assert "Lisbon" in await desk.call("forecast", {"city": "Lisbon"})
            result = await desk.simulate("scenarios/weather.yaml")
            assert result.failures == []

``Frontdesk`` is a temporary store (a fresh SQLite file, every loaded plugin's migrations run)
with the plugins loaded through the same host, checks and settings as in production:
``call`` runs one tool with a real ``ToolContext`` (its plugin's settings as ``ctx.config``,
its arguments validated and typed, its row written), ``simulate`` runs a scenario on real
``AgentSession``s with a scripted LLM and the background runner, as ``frontdesk simulate``
does.
"""

# Relative: an editable install also sees this folder as frontdesk.agents.programs.testing.
from .desk import Frontdesk, Simulation

__all__ = ["Frontdesk", "Simulation"]
