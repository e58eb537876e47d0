"""``frontdesk plugins``: list, install and uninstall plugins.

None of this imports livekit: listing loads plugins only far enough to ask their registration
hooks, and install/uninstall hand over to pip in this same environment, the way ``llm
install`` and ``datasette install`` do.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import subprocess
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import typer

from frontdesk.agents.programs.exits import fail
from frontdesk.core.errors import FrontdeskError

app = typer.Typer(help="Plugins: list, install, uninstall, new.", no_args_is_help=True)

# Unknown options go straight to pip (--no-deps, --index-url, --no-build-isolation, ...).
PIP_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command("list")
def list_(
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    db: str | None = typer.Option(
        None, "--db", help="Database to try pending plugin migrations on (rolled back)."
    ),
) -> None:
    """Show every plugin with its status, version, source, hooks, tools and errors.

    A plugin is FAIL when it cannot import, its migrations folder is missing, or (against an
    existing database) a pending migration of its fails. Exits 0 even then: reporting broken
    plugins is what this is for.
    """
    from frontdesk.core import host
    from frontdesk.core.settings import load_settings

    settings = load_settings()
    registry = host.load(settings)
    _try_migrations(registry, db or settings.database_url, explicit=db is not None)
    # Ask register_commands against a throwaway app, so its errors and commands show too.
    registry.add_commands(typer.Typer())
    infos = [*registry.plugins.values(), *registry.skipped]
    rows = [info.to_json(registry) for info in infos]
    profile = [*registry.profile_errors, *registry.profile_warnings]
    if as_json:
        data = {"plugins": rows, "conflicts": registry.conflicts, "profile": profile}
        typer.echo(json.dumps(data, indent=2))
        return
    _table(rows, registry.conflicts, profile)


def _try_migrations(registry: Any, url: str, *, explicit: bool) -> None:
    """Withdraw (and so show as failed) plugins whose pending migration fails on ``url``. The
    trial is rolled back; a database that does not exist yet is left alone unless named."""
    from frontdesk.db.engine import mask_url, parse_url

    if not registry.migrations:
        return
    try:
        parsed = parse_url(url)
        if not explicit and parsed.get_backend_name() == "sqlite":
            if not Path(parsed.database or "").is_file():
                return
        from frontdesk.core.plugin_migrations import trial
        from frontdesk.core.schema import withdraw_failed

        withdraw_failed(registry, asyncio.run(trial(url, registry)))
    except Exception as exc:  # listing still works without the database
        if explicit:
            reason = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise fail(f"cannot try plugin migrations on {mask_url(url)}: {reason}") from None


STATUS_STYLE = {"loaded": "green", "failed": "bold red", "skipped": "dim"}


def _table(rows: list[dict[str, Any]], conflicts: list[dict[str, str]], profile: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="frontdesk plugins")
    columns = ("name", "status", "version", "source", "hooks", "tools per department", "errors")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        tools = "\n".join(f"{dept}: {', '.join(names)}" for dept, names in row["tools"].items())
        if row["commands"]:
            tools = "\n".join(filter(None, [tools, f"commands: {', '.join(row['commands'])}"]))
        # The errors themselves follow the table, each on one unwrapped line to copy or grep.
        count = len(row["errors"])
        problems = Text(f"{count} (below)" if count else "", style="red")
        if row["skipped"] and row["skipped"] not in row["errors"]:
            problems = Text(f"skipped: {row['skipped']}", style="dim")
        status = "FAIL" if row["status"] == "failed" else row["status"]
        table.add_row(
            Text(row["name"], style="dim" if row["skipped"] else "bold"),
            Text(status, style=STATUS_STYLE[row["status"]]),
            row["version"] or "",
            row["source"],
            "\n".join(row["hooks"]),
            tools,
            problems,
        )
    console = Console()
    console.print(table)
    for row in rows:
        for error in row["errors"]:
            console.print(Text.assemble((f"{row['name']}: ", "red"), error), soft_wrap=True)
    for c in conflicts:
        console.print(
            f"[yellow]conflict:[/] {c['kind']} {c['name']!r}: {c['winner']} wins over {c['loser']}",
            soft_wrap=True,
        )
    for line in profile:
        console.print(Text.assemble(("profile: ", "yellow"), line), soft_wrap=True)


@app.command(context_settings=PIP_PASSTHROUGH)
def install(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="A package name, a path or a URL pip understands."),
    upgrade: bool = typer.Option(False, "--upgrade", "-U", help="Upgrade if installed."),
    editable: bool = typer.Option(False, "--editable", "-e", help="Install a path editable."),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show all of pip's output, 'already satisfied' lines too."
    ),
) -> None:
    """Install a plugin into frontdesk's own environment with pip.

    Extra options are passed to pip, e.g. ``--no-deps`` or ``--index-url URL``. Exits 1 when
    the package adds no frontdesk plugin, or adds one that fails to import.
    """
    if Path(target).exists():  # a local path: make it unambiguous for pip
        target = str(Path(target).resolve())
    before = _plugin_names()
    flags = [*(["--upgrade"] if upgrade else []), *ctx.args]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        flags += ["--report", str(report)]
        _pip("install", *flags, *(["--editable"] if editable else []), target, verbose=verbose)
        installed = _installed(report)
    importlib.invalidate_caches()
    added = sorted(_plugin_names() - before)
    if not added:
        # Reinstalled, or already there: the plugins of the packages pip just handled.
        added = sorted(_plugins_of({*installed, _canonical(Path(target).name)}))
    if not added:
        typer.echo(
            f"{target} was installed, but it adds no frontdesk plugin: a plugin is declared "
            'as an entry point in the "frontdesk" group (see docs/plugins.md); '
            "`frontdesk plugins list` shows the plugins already installed",
            err=True,
        )
        raise typer.Exit(1)
    for line in _name_clashes({*installed, _canonical(Path(target).name)}):
        typer.echo(f"warning: {line}", err=True)
    broken = _import_problems(added)
    good = [name for name in added if name not in broken]
    if good:
        typer.echo(f"installed plugin(s): {', '.join(good)}")
    for name, why in broken.items():
        typer.echo(
            f"plugin {name} was installed but fails to import: {why}; fix or uninstall it "
            f"(`frontdesk plugins uninstall {name}`)",
            err=True,
        )
    if broken:
        raise typer.Exit(1)


def _installed(report: Path) -> set[str]:
    """The distributions pip installed, from its ``--report`` (empty if it wrote none)."""
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        return {_canonical(item["metadata"]["name"]) for item in data.get("install", [])}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _name_clashes(dists: set[str]) -> list[str]:
    """A plugin these distributions provide whose name another distribution's plugin already
    has: only one of them loads (a built-in always; otherwise the first by the host's order)."""
    by_name: dict[str, list[Any]] = {}
    for ep in entry_points(group="frontdesk"):
        by_name.setdefault(ep.name, []).append(ep)
    lines = []
    for name, eps in sorted(by_name.items()):
        owners = sorted({_dist_of(ep) for ep in eps}, key=lambda d: (d != "frontdesk", d))
        ours = [d for d in owners if _canonical(d) in dists]
        if len(owners) < 2 or not ours:
            continue
        winner, losers = owners[0], owners[1:]
        who = "a built-in plugin" if winner == "frontdesk" else winner
        for loser in losers:
            lines.append(
                f"plugin name {name!r} is already taken by {who}, so {loser}'s {name!r} will "
                "be skipped; rename its entry point (the [project.entry-points.frontdesk] key)"
            )
    return lines


def _dist_of(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    return str(dist.name) if dist is not None else "?"


def _plugins_of(dists: set[str]) -> set[str]:
    """The frontdesk plugins these (canonical) distribution names provide."""
    return {
        ep.name
        for ep in entry_points(group="frontdesk")
        if getattr(ep, "dist", None) is not None and _canonical(str(ep.dist.name)) in dists
    }


def _import_problems(names: list[str]) -> dict[str, str]:
    """Each named plugin whose module cannot be imported, with why, in one line. Imported in
    a fresh interpreter: this one has already cached what the environment held before."""
    code = (
        "import json, sys, traceback\n"
        "from importlib.metadata import entry_points\n"
        "out = {}\n"
        "for ep in entry_points(group='frontdesk'):\n"
        "    if ep.name in sys.argv[1:]:\n"
        "        try:\n"
        "            ep.load()\n"
        "        except BaseException as exc:\n"
        "            out[ep.name] = ''.join(traceback.format_exception_only(type(exc), exc)).strip()\n"
        "print(json.dumps(out))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired) as exc:
        return {name: f"could not check ({exc})" for name in names}
    return {name: " ".join(str(why).split())[:300] for name, why in found.items()}


@app.command(context_settings=PIP_PASSTHROUGH)
def uninstall(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="A plugin name (as in `plugins list`) or a package."),
    drop_tables: bool = typer.Option(
        False,
        "--drop-tables",
        help="First take the plugin's migration branch down to base: its tables are dropped.",
    ),
    db: str | None = typer.Option(
        None, "--db", help="Database URL (default: FRONTDESK_DATABASE_URL)."
    ),
) -> None:
    """Uninstall a plugin's package from frontdesk's environment with pip.

    Its tables stay in the database unless --drop-tables; the command says which stay and
    how to drop them."""
    from frontdesk.core.host import builtin_names
    from frontdesk.core.settings import load_settings

    if name in builtin_names() or name.replace("_", "-").lower() == "frontdesk":
        raise fail(f"{name} is built in; disable it with FRONTDESK_DISABLE_PLUGINS={name}")
    package = _package_of(name)
    if package is None:
        raise fail(f"no installed plugin or package named {name!r}; see `frontdesk plugins list`")
    url = db or load_settings().database_url
    left = leftovers(_plugins_of({_canonical(package)}), url)
    if drop_tables:
        from frontdesk.agents.programs.cli_db import drop_branch

        for plugin, _revision, _tables, versions in left:
            drop_branch(url, plugin, versions)
            typer.echo(f"{plugin}: downgraded to base; its tables are dropped")
        left = []
    _pip("uninstall", "--yes", *ctx.args, package)
    typer.echo(f"uninstalled {package}")
    for plugin, revision, tables, _versions in left:
        stay = ", ".join([*tables, f"alembic_version_{plugin}"])
        typer.echo(
            f"{plugin}'s tables stay in {_masked(url)}: {stay} (branch {plugin} at {revision}). "
            f"To drop them, reinstall it and run `frontdesk db downgrade base --branch {plugin}`, "
            f"or next time uninstall with --drop-tables; `frontdesk db current` shows the branch "
            "as orphaned meanwhile."
        )


@app.command("new")
def new(
    name: str = typer.Argument(..., help="The plugin's name: also its desk's, e.g. reservations."),
    into: Path = typer.Option(Path("."), "--dir", help="Where to create frontdesk-NAME/."),
) -> None:
    """Write a new plugin package: a desk with one tool per pattern, settings, a table and its
    migration, a doctor check, a scenario and pytest tests (frontdesk.testing)."""
    from frontdesk.agents.programs.scaffold import scaffold
    from frontdesk.core.host import builtin_names

    try:
        root = scaffold(name, into, builtin_names())
    except FrontdeskError as exc:
        raise fail(str(exc)) from None
    typer.echo(
        f"created {root}: a {name} desk with one tool per pattern, its settings, table,\n"
        "migration, doctor check, a scenario and tests. Next:\n"
        f"  cd {root}\n"
        "  pip install -e '.[test]'      # or: frontdesk plugins install -e .\n"
        "  pytest\n"
        f"  frontdesk simulate scenarios/{name}.yaml"
    )


def leftovers(plugins: set[str], url: str) -> list[tuple[str, str, list[str], Path]]:
    """(plugin, its revision, its tables present, its versions folder) for each of ``plugins``
    whose migration branch is applied in the database at ``url`` (read only)."""
    from frontdesk.core import host

    registry = host.load()
    folders = {p: registry.migrations[p] for p in sorted(plugins) if p in registry.migrations}
    if not folders:
        return []
    from frontdesk.core.plugin_migrations import applied

    try:
        return asyncio.run(applied(url, folders))
    except Exception:  # no database (yet), or not reachable: nothing is left behind there
        return []


def _masked(url: str) -> str:
    from frontdesk.db.engine import mask_url

    return mask_url(url)


def _pip(*args: str, verbose: bool = True) -> None:
    command = [sys.executable, "-m", "pip", *args]
    try:
        code = _run_pip(command, verbose)
    except OSError as exc:
        raise fail(f"could not run pip: {exc}") from None
    if code != 0:
        raise fail(f"pip {args[0]} failed with exit code {code} (see pip's output above)")


QUIET_PREFIXES = ("Requirement already satisfied",)


def _run_pip(command: list[str], verbose: bool) -> int:
    """Run pip, its output streaming through: its progress and errors are the useful detail.
    Unless ``verbose``, its "Requirement already satisfied" line for each of frontdesk's
    ~100 dependencies is left out."""
    if verbose:
        return subprocess.call(command)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            if not line.startswith(QUIET_PREFIXES):
                sys.stdout.write(line)
                sys.stdout.flush()
    return proc.wait()


def _plugin_names() -> set[str]:
    return {ep.name for ep in entry_points(group="frontdesk")}


def _package_of(name: str) -> str | None:
    """The distribution to uninstall: the one behind plugin ``name``, or a package of that
    name that provides a frontdesk plugin. Never any other package: `plugins uninstall
    sqlalchemy` must not take a dependency away."""
    plugin_dists = {}
    for ep in entry_points(group="frontdesk"):
        dist = getattr(ep, "dist", None)
        if dist is None:
            continue
        if ep.name == name:
            return str(dist.name)
        plugin_dists[_canonical(str(dist.name))] = str(dist.name)
    return plugin_dists.get(_canonical(name))


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="plugins")
