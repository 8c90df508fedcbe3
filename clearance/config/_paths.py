"""Where things are when the configuration does not say: the config file, the bundled
policy packs, and the state directory that holds a workspace's journal and grants."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from clearance.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "PACKS_DIR",
    "default_journal_path",
    "find_config",
    "pack_path",
    "state_directory",
]

CONFIG_FILE = "clearance.toml"
"""The file name looked for in the current directory when no ``--config`` is given."""

PACKS_DIR = Path(__file__).resolve().parent.parent / "packs"
"""Where the bundled starter policy packs live (``pack = "coding"``)."""


def state_directory(base_dir: str | os.PathLike[str]) -> Path:
    """Where the journal and grants of the workspace ``base_dir`` live by default:
    ``$CLEARANCE_STATE_DIR``, else ``$XDG_STATE_HOME/clearance``, else
    ``~/.local/state/clearance``, then ``<name>-<hash of the resolved path>``.

    Outside the workspace on purpose: an agent whose tools work in the workspace must not
    be able to read, rewrite or delete the record of what it did, nor its grants.
    """
    top_env = os.environ.get("CLEARANCE_STATE_DIR")
    if top_env:
        top = Path(top_env)
    else:
        xdg = os.environ.get("XDG_STATE_HOME")
        top = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "clearance"
    real = os.path.realpath(os.fspath(base_dir))
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real) or "root")[:40]
    return top / f"{name}-{digest}"


def default_journal_path(base_dir: str | os.PathLike[str]) -> Path:
    """The journal (and grant store) file used when none is configured: ``clearance.db``
    in :func:`state_directory`."""
    return state_directory(base_dir) / "clearance.db"


def pack_path(name: str) -> Path:
    """The directory of a bundled policy pack.

    Raises:
        ConfigError: no bundled pack has this name.
    """
    path = PACKS_DIR / name
    if not re.fullmatch(r"[a-z0-9_-]+(/[a-z0-9_-]+)?", name) or not any(path.glob("*.cedar")):
        known = sorted(str(p.parent.relative_to(PACKS_DIR)) for p in PACKS_DIR.glob("**/*.cedar"))
        known = sorted(set(known))
        raise ConfigError(
            f"no bundled policy pack named {name!r}"
            + (f" (bundled: {', '.join(known)})" if known else "")
        )
    return path


def find_config(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """``clearance.toml`` in ``directory`` (default: the current directory), if it exists."""
    candidate = Path(directory) / CONFIG_FILE if directory is not None else Path(CONFIG_FILE)
    return candidate if candidate.is_file() else None
