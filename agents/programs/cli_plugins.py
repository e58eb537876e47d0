"""``frontdesk plugins``: list, install and uninstall plugins.

None of this imports livekit: listing loads plugins only far enough to ask their registration
hooks, and install/uninstall hand over to pip in this same environment, the way ``llm
install`` and ``datasette install`` do.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import typer

from frontdesk.agents.programs.exits import fail

app = typer.Typer(help="Plugins: list, install, uninstall.", no_args_is_help=True)

# Unknown options go straight to pip (--no-deps, --index-url, --no-build-isolation, ...).
PIP_PASSTHROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command("list")
def list_(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Show every plugin with its version, source, hooks, tools and errors.

    Exits 0 even when a plugin is broken: reporting broken plugins is what this is for.
    """
    from frontdesk.core import host
    from frontdesk.core.settings import load_settings

    registry = host.load(load_settings())
    # Ask register_commands against a throwaway app, so its errors and commands show too.
    registry.add_commands(typer.Typer())
    infos = [*registry.plugins.values(), *registry.skipped]
    rows = [info.to_json(registry) for info in infos]
    if as_json:
        typer.echo(json.dumps({"plugins": rows, "conflicts": registry.conflicts}, indent=2))
        return
    _table(rows, registry.conflicts)


def _table(rows: list[dict[str, Any]], conflicts: list[dict[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="frontdesk plugins")
    for column in ("name", "version", "source", "hooks", "tools per department", "errors"):
        table.add_column(column, overflow="fold")
    for row in rows:
        tools = "\n".join(f"{dept}: {', '.join(names)}" for dept, names in row["tools"].items())
        if row["commands"]:
            tools = "\n".join(filter(None, [tools, f"commands: {', '.join(row['commands'])}"]))
        problems = Text("\n".join(row["errors"]), style="red")
        if row["skipped"] and row["skipped"] not in row["errors"]:
            problems = Text(f"skipped: {row['skipped']}", style="dim")
        table.add_row(
            Text(row["name"], style="dim" if row["skipped"] else "bold"),
            row["version"] or "",
            row["source"],
            "\n".join(row["hooks"]),
            tools,
            problems,
        )
    console = Console()
    console.print(table)
    for c in conflicts:
        console.print(
            f"[yellow]conflict:[/] {c['kind']} {c['name']!r}: {c['winner']} wins over {c['loser']}"
        )


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
    _pip("install", *flags, *(["--editable"] if editable else []), target, verbose=verbose)
    importlib.invalidate_caches()
    added = sorted(_plugin_names() - before)
    if not added:
        typer.echo(
            f"{target} was installed, but it adds no frontdesk plugin: a plugin is declared "
            'as an entry point in the "frontdesk" group (see docs/plugins.md); '
            "`frontdesk plugins list` shows the plugins already installed",
            err=True,
        )
        raise typer.Exit(1)
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
) -> None:
    """Uninstall a plugin's package from frontdesk's environment with pip."""
    from frontdesk.core.host import builtin_names

    if name in builtin_names() or name.replace("_", "-").lower() == "frontdesk":
        raise fail(f"{name} is built in; disable it with FRONTDESK_DISABLE_PLUGINS={name}")
    package = _package_of(name)
    if package is None:
        raise fail(f"no installed plugin or package named {name!r}; see `frontdesk plugins list`")
    _pip("uninstall", "--yes", *ctx.args, package)
    typer.echo(f"uninstalled {package}")


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
