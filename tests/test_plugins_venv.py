"""A throwaway virtualenv that sees frontdesk but installs plugins only into itself.

Installing into the project venv would show the plugin to every other test run sharing it
(and leave it behind if a run is killed). Instead each module gets a fresh venv whose
site-packages chains to the project's through a .pth file: frontdesk, pip and setuptools come
from the project, while ``pip install`` (run by this venv's python, so sys.prefix is the temp
venv) writes only into the temp venv. Installs are offline: --no-deps --no-build-isolation.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEATHER_SRC = ROOT / "examples" / "frontdesk-weather"
OFFLINE = ("--no-deps", "--no-build-isolation", "--no-index")


class PluginVenv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.weather_copy: Path | None = None  # set by fixtures that copy the example
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
        self.python = path / "bin" / "python"
        own = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        self.purelib = Path(own)
        parents = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
        # addsitedir (not a bare path line) so the project's own .pth files run too: the
        # editable frontdesk install is one.
        lines = [f"import site; site.addsitedir({p!r})" for p in parents]
        (Path(own) / "_frontdesk_parent.pth").write_text("\n".join(lines) + "\n")
        self.frontdesk_script = path / "bin" / "frontdesk"
        self.frontdesk_script.write_text(
            f"#!{self.python}\nfrom frontdesk.agents.programs.cli import main\nmain()\n"
        )
        self.frontdesk_script.chmod(0o755)

    def env(self, **extra: str) -> dict[str, str]:
        """This venv's environment. The project's site-packages are chained in, so a plugin
        installed there (one being developed, a broken one) would load here too: only the
        plugins installed into this venv itself do, unless a test sets the lists itself."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FRONTDESK_", "LIVEKIT_"))
            and k not in ("VIRTUAL_ENV", "PYTHONPATH")
        }
        env.update(
            VIRTUAL_ENV=str(self.path),
            PIP_DISABLE_PIP_VERSION_CHECK="1",
            FRONTDESK_LOAD_PLUGINS=",".join(self.own_plugins()),
        )
        env.update(extra)
        return env

    def own_plugins(self) -> list[str]:
        """The frontdesk plugins of the distributions installed into this venv's own
        site-packages (read from their metadata, without running anything)."""
        found = set()
        for dist in importlib.metadata.distributions(path=[str(self.purelib)]):
            found |= {ep.name for ep in dist.entry_points if ep.group == "frontdesk"}
        return sorted(found)

    def frontdesk(
        self, *args: str, timeout: float = 180, **env: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.frontdesk_script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.path,  # no stray .env or relative paths from the repo
            env=self.env(**env),
        )

    def python_run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.python), *args],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=self.path,
            env=self.env(**env),
        )

    def install(self, source: Path) -> subprocess.CompletedProcess[str]:
        """Install a plugin package through ``frontdesk plugins install``, offline."""
        return self.frontdesk("plugins", "install", str(source), *OFFLINE)

    def uninstall_quietly(self, *packages: str) -> None:
        self.python_run("-m", "pip", "uninstall", "-y", *packages)


def copy_package(src: Path, dest: Path) -> Path:
    """A clean copy, so building never writes build/ or egg-info into the repository."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    return dest


def broken_package(dest: Path) -> Path:
    """A plugin package whose module raises at import."""
    (dest / "frontdesk_broken").mkdir(parents=True)
    (dest / "pyproject.toml").write_text(
        """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "frontdesk-broken"
version = "0.0.1"

[project.entry-points.frontdesk]
broken = "frontdesk_broken"

[tool.setuptools]
packages = ["frontdesk_broken"]
"""
    )
    (dest / "frontdesk_broken" / "__init__.py").write_text(
        'raise RuntimeError("the broken plugin fails at import")\n'
    )
    return dest


def test_the_temp_venv_sees_frontdesk_but_installs_into_itself(tmp_path):
    venv = PluginVenv(tmp_path / "venv")
    result = venv.python_run(
        "-c",
        "import sys, sysconfig, frontdesk.core, pip;"
        "print(sys.prefix); print(sysconfig.get_paths()['purelib'])",
    )
    assert result.returncode == 0, result.stderr
    prefix, purelib = result.stdout.split()
    assert Path(prefix) == venv.path and Path(purelib).is_relative_to(venv.path)
    help_ = venv.frontdesk("plugins", "--help")
    assert help_.returncode == 0 and "install" in help_.stdout
