"""docs/plugins.md is tested: every python, toml and yaml block runs here, read from the page
(tests/docs_blocks.py), and what the page says a block does is checked against frontdesk
through ``frontdesk.testing``. The console blocks and the Packaging snippet run in a real
virtualenv in test_plugins_authoring.py.
"""

from __future__ import annotations
import __future__

import asyncio
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docs_blocks
import pytest
import yaml
from typer.testing import CliRunner

from frontdesk.core import ToolError, hookimpl
from frontdesk.core.profile import Profile
from frontdesk.testing import Frontdesk

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

sys.path.insert(0, str(docs_blocks.WEATHER))
import frontdesk_weather  # noqa: E402

PAGE = "docs_plugins_page"
Check = Callable[[types.ModuleType, docs_blocks.Block], None]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def plugin(**hooks: Any) -> types.SimpleNamespace:
    """A plugin object from hook functions (each already marked with @hookimpl)."""
    return types.SimpleNamespace(**hooks)


def tools_plugin(*specs: Any) -> Any:
    class Tools:
        @hookimpl
        def register_tools(self, register: Any) -> None:
            for spec in specs:
                register(spec, departments="*")

    return Tools()


# -- what each block is said to do ------------------------------------------------------------


def whole_plugin(page: types.ModuleType, block: docs_blocks.Block) -> None:
    async def check() -> None:
        async with Frontdesk(plugins={"weather": page}) as desk:
            assert desk.errors == []
            assert "forecast" in desk.tools("weather")
            assert "packing_tips" in desk.tools("search")
            assert await desk.call("forecast", {"city": "Lisbon"}) == "Lisbon: sunny, high 24°C"

    run(check())


def commands_hook(page: types.ModuleType, block: docs_blocks.Block) -> None:
    import typer

    page.forecast_for = frontdesk_weather.forecast_for  # the example's, which the page names
    page.WeatherSettings = frontdesk_weather.WeatherSettings
    page.plugin_config = frontdesk_weather.plugin_config
    app = typer.Typer()
    page.register_commands(cli=app)
    app.command("noop")(lambda: None)  # typer runs a lone command without its name
    result = CliRunner().invoke(app, ["weather-check", "Lisbon"])
    assert result.exit_code == 0 and result.output.strip() == "Lisbon: sunny, high 10°C, low 6°C"


def observer(page: types.ModuleType, block: docs_blocks.Block) -> None:
    event = types.SimpleNamespace(status="succeeded", to_json=lambda: {"status": "succeeded"})
    page.on_task_event(event=event)
    assert page.events_seen["succeeded"] == 1


def settings_hook(page: types.ModuleType, block: docs_blocks.Block) -> None:
    @hookimpl
    def register_tools(register: Any) -> None:
        register(page.forecast_in_units)

    # ctx.config is the settings of the tool's own plugin: one plugin with both.
    weather = plugin(register_settings=page.register_settings, register_tools=register_tools)

    async def check() -> None:
        async with Frontdesk(plugins={"weather": weather}) as desk:
            assert type(desk.config("weather")).__name__ == "WeatherSettings"
            assert await desk.call("forecast_in_units", {"city": "Oslo"}) == "Oslo: sunny (metric)"

    run(check())


def migration_revision(page: types.ModuleType, block: docs_blocks.Block) -> None:
    page.revision_file = block.code  # written into a versions folder by the next check


def migrations_hook(page: types.ModuleType, block: docs_blocks.Block) -> None:
    assert callable(page.register_migrations)


def database_use(page: types.ModuleType, block: docs_blocks.Block, tmp: Path) -> None:
    versions = tmp / "migrations"
    versions.mkdir()
    (versions / "weather_0001_lookups.py").write_text(page.revision_file)
    from frontdesk.core import ToolContext, tool

    @tool
    async def remember(ctx: ToolContext, city: str) -> list[str]:
        """Save a city and list the saved ones."""
        await page.save(ctx, city)
        return await page.cities(ctx)

    @hookimpl
    def register_migrations(register: Any) -> None:
        register(versions)

    async def check() -> None:
        weather = plugin(register_migrations=register_migrations)
        async with Frontdesk(plugins={"weather": weather, "tools": tools_plugin(remember)}) as desk:
            assert desk.errors == []
            assert await desk.call("remember", {"city": "Lisbon"}) == ["Lisbon"]

    run(check())


def doctor(page: types.ModuleType, block: docs_blocks.Block) -> None:
    settings = frontdesk_weather.WeatherSettings
    assert page.doctor_checks(config=None) == []
    assert page.doctor_checks(config=settings(service_url=None))[0][0] == "warn"
    ok = page.doctor_checks(config=settings(service_url="http://127.0.0.1:9/"))
    assert ok == [("ok", "forecasts from http://127.0.0.1:9/")]


def typed_arguments(page: types.ModuleType, block: docs_blocks.Block) -> None:
    async def check() -> None:
        tools = tools_plugin(page.book_table, page.make_statement)
        async with Frontdesk(plugins={"tables": tools}) as desk:
            assert desk.errors == []
            args = {
                "day": "2031-06-06",
                "party": 4,
                "deposit": "12.50",
                "seating": "terrace",
                "guest": {"name": "Ana"},
            }
            said = await desk.call("book_table", args)
            assert said == "Ana: 4 on Friday, terrace, deposit 12.50"
            [row] = await desk.tasks(tool="book_table")
            assert row.args == {**args, "guest": {"name": "Ana", "phone": None}}
            with pytest.raises(ToolError, match="parties of up to 8"):
                await desk.call("book_table", {**args, "party": 12})
            run_ = await desk.simulate(
                {
                    "caller": "ana",
                    "steps": [
                        {"user": "my statement", "llm": [{"tools": [{"make_statement": {"month": "2031-06-01"}}]}]},
                        {"wait": {"task": "make_statement", "delivered": True, "timeout": 20}},
                        {"expect": {"said": "statement \\(reference \\d+\\) is ready"}},
                    ],
                }
            )  # fmt: skip
            assert run_.failures == []
            [output] = [e["output"] for e in run_.events if e["type"] == "tool_output"]
            assert output.startswith("I'm preparing your statement as reference ")

    run(check())


def page_tests(page: types.ModuleType, block: docs_blocks.Block) -> None:
    names = [
        n for n in vars(page) if n.startswith("test_") and n not in page.__dict__.get("_ran", set())
    ]
    assert names, f"{block.where} defines no test"
    for name in names:
        run(getattr(page, name)())
    page.__dict__.setdefault("_ran", set()).update(names)


CHECKS: list[tuple[str, str, Callable[..., None]]] = [
    ("A whole plugin", "def register_departments", whole_plugin),
    ("register_commands(cli)", '@cli.command("weather-check")', commands_hook),
    ("on_task_event(event)", "def on_task_event(event):", observer),
    ("register_settings(register)", "class WeatherSettings", settings_hook),
    ("register_migrations(register)", 'revision = "weather_0001"', migration_revision),
    ("register_migrations(register)", "def register_migrations(register):", migrations_hook),
    ("register_migrations(register)", "async def save(", database_use),
    ("doctor_checks(config, hook)", "def doctor_checks(config):", doctor),
    ("Typed arguments", "async def book_table(", typed_arguments),
    ("Testing a plugin", "async def test_", page_tests),
]


def test_every_block_is_a_kind_this_suite_runs():
    found = docs_blocks.blocks()
    assert len(found) > 30
    for block in found:
        assert block.lang in docs_blocks.LANGUAGES, f"{block.where}: a ```{block.lang} block"
        assert set(block.tags) <= docs_blocks.TAGS, f"{block.where}: unknown tags {block.tags}"
    python = [b for b in found if b.lang == "python" and "signature" not in b.tags]
    claimed = [b for b in python if any(s == b.section and m in b.code for s, m, _ in CHECKS)]
    assert len(claimed) >= len(CHECKS)  # every check found its block on the page


def test_the_python_blocks_run_in_page_order_and_do_what_the_page_says(tmp_path, monkeypatch):
    monkeypatch.chdir(docs_blocks.ROOT)  # the page's paths are the repository's
    page = types.ModuleType(PAGE)
    page.__file__ = str(tmp_path / "page.py")
    monkeypatch.setitem(sys.modules, PAGE, page)
    # Signatures name types they do not import: annotations are left unevaluated.
    flags = __future__.annotations.compiler_flag
    checked = 0
    for block in docs_blocks.blocks():
        if block.lang != "python":
            continue
        code = compile(block.code, block.where, "exec", flags=flags, dont_inherit=True)
        exec(code, page.__dict__)
        for section, marker, check in CHECKS:
            if block.section == section and marker in block.code:
                args = (page, block, tmp_path) if check is database_use else (page, block)
                check(*args)
                checked += 1
    assert checked >= len(CHECKS)


def test_the_toml_blocks_are_what_they_say():
    found = [b for b in docs_blocks.blocks() if b.lang == "toml"]
    kinds = set()
    for block in found:
        data = tomllib.loads(block.code)
        if "project" in data:  # the Packaging snippet, built and installed for real elsewhere
            kinds.add("pyproject")
            assert data["project"]["entry-points"]["frontdesk"] == {"weather": "frontdesk_weather"}
            assert (
                "migrations/*.py" in data["tool"]["setuptools"]["package-data"]["frontdesk_weather"]
            )
        elif "tool" in data:
            kinds.add("pytest")
            assert data["tool"]["pytest"]["ini_options"]["asyncio_mode"] == "auto"
        else:
            kinds.add("profile")
            profile = Profile.model_validate(data)

            async def check(profile: Profile = profile) -> None:
                async with Frontdesk(
                    plugins={"weather": frontdesk_weather}, profile=profile.model_dump()
                ) as desk:
                    assert desk.config("weather").units == "imperial"

            run(check())
    assert kinds == {"pyproject", "pytest", "profile"}


def test_the_yaml_block_is_the_example_scenario():
    [block] = [b for b in docs_blocks.blocks() if b.lang == "yaml"]
    first = block.code.splitlines()[0]
    assert first.startswith("# examples/calls/")
    path = docs_blocks.ROOT / first[2:].strip()
    assert yaml.safe_load(block.code) == yaml.safe_load(path.read_text())

    async def check() -> None:
        async with Frontdesk(plugins={"weather": frontdesk_weather}) as desk:
            run_ = await desk.simulate(yaml.safe_load(block.code))
            assert run_.failures == []

    run(check())


def test_the_pages_tests_import_only_the_public_modules():
    for block in docs_blocks.blocks():
        if block.lang != "python":
            continue
        for line in block.code.splitlines():
            if line.startswith(("import frontdesk", "from frontdesk")) and "frontdesk_" not in line:
                module = line.split()[1]
                assert module in ("frontdesk.core", "frontdesk.testing"), f"{block.where}: {line}"
