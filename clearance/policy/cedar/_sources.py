"""Where a Cedar policy set comes from: policy text, or a directory of ``*.cedar`` files with
its ``schema.json`` and ``entities.json``, read as one consistent snapshot.

A snapshot holds every file's bytes and the directory's stat signature, taken before and
after reading them (equal, or the read is refused: a later look will do). The evaluator's
watch mode compares snapshots to load a change only once it has settled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clearance.errors import ConfigError
from clearance.policy.cedar.entities import EntitiesSource, load_entities

__all__ = [
    "ENTITIES_FILE",
    "SCHEMA_FILE",
    "PolicyDirectory",
    "PolicyInput",
    "Snapshot",
    "Sources",
    "policy_pairs",
    "schema_fragment",
]

PolicyInput = str | Sequence[tuple[str, str]]
"""Cedar policy text, or ``(path, text)`` pairs, one per file."""

ENTITIES_FILE = "entities.json"
SCHEMA_FILE = "schema.json"


@dataclass(frozen=True, slots=True)
class Sources:
    """One policy set's inputs: policies, extra entities, schema declarations."""

    policies: list[tuple[str, str]]
    entities: list[dict[str, Any]]
    schema: Mapping[str, Any] | None
    signature: tuple[Any, ...] = ()
    contents: tuple[tuple[str, bytes], ...] | None = None
    """The directory's files as read (``None``: not read from a directory)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a policy directory held at one look: each file's bytes, and its stat
    signature (which was the same before and after the files were read)."""

    signature: tuple[Any, ...]
    contents: tuple[tuple[str, bytes], ...]


class PolicyDirectory:
    """A directory of ``*.cedar`` files (searched recursively), with ``schema.json`` and,
    unless ``entities`` is given, ``entities.json``.

    Args:
        directory: the policy directory.
        entities: extra entities given instead of ``entities.json``.
    """

    def __init__(self, directory: Path, entities: EntitiesSource | None) -> None:
        self.path = directory
        self.entities = entities

    def read(self) -> Sources:
        """The policy set the directory holds now.

        Raises:
            ConfigError: see :meth:`snapshot` and :meth:`sources_from`.
        """
        return self.sources_from(self.snapshot())

    def signature(self) -> tuple[Any, ...]:
        """The stat signature of the set's files (changes when one is written)."""
        return _signature(self.path, self.policy_files())

    def policy_files(self) -> list[Path]:
        directory = self.path
        return sorted(p for p in directory.rglob("*.cedar") if p.is_file())

    def snapshot(self) -> Snapshot:
        """Read every file the set is made of, with their signature before and after.

        Raises:
            ConfigError: the directory is missing or empty, or a file cannot be read, or
                the files changed while they were read (a later look will do).
        """
        directory = self.path
        if not directory.is_dir():
            raise ConfigError("the policy directory does not exist", path=str(directory))
        files = self.policy_files()
        if not files:
            raise ConfigError("the policy directory holds no *.cedar file", path=str(directory))
        extra = [directory / SCHEMA_FILE]
        if self.entities is None:
            extra.append(directory / ENTITIES_FILE)
        signature = _signature(directory, files)
        contents: list[tuple[str, bytes]] = []
        for path in [*files, *(p for p in extra if p.is_file())]:
            try:
                contents.append((str(path), path.read_bytes()))
            except OSError as exc:
                raise ConfigError(f"cannot read: {exc}", path=str(path)) from None
        if _signature(directory, files) != signature:
            raise ConfigError("the files changed while they were read", path=str(directory))
        return Snapshot(signature, tuple(contents))

    def look(self) -> Snapshot:
        """:meth:`snapshot` for watching: a directory that is gone or holds no ``*.cedar``
        file reads as an empty set (which permits nothing), not as an error, so that
        deleting the policies withdraws their permits instead of leaving them in force.

        Raises:
            ConfigError: a file cannot be read, or the files changed while they were read.
        """
        directory = self.path
        if not directory.is_dir() or not self.policy_files():
            return Snapshot(("empty", str(directory)), ())
        return self.snapshot()

    def sources_from(self, snapshot: Snapshot) -> Sources:
        """The policy set a snapshot holds (nothing is read again).

        Raises:
            ConfigError: a file is not UTF-8, or ``entities.json`` / ``schema.json`` is
                malformed.
        """
        directory = self.path
        texts: dict[str, str] = {}
        for name, data in snapshot.contents:
            try:
                texts[name] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"cannot read the file: {exc}", path=name) from None
        schema_path = str(directory / SCHEMA_FILE)
        entities_path = str(directory / ENTITIES_FILE)
        policies = [(n, t) for n, t in texts.items() if n not in (schema_path, entities_path)]
        entities_source: EntitiesSource | None = self.entities
        if entities_source is None and entities_path in texts:
            entities_source = _json_file(texts[entities_path], entities_path, "entities are")
        schema: Mapping[str, Any] | None = None
        if schema_path in texts:
            schema = _json_file(texts[schema_path], schema_path, "")
        return Sources(
            policies,
            load_entities(entities_source),
            schema_fragment(schema, schema_path),
            snapshot.signature,
            snapshot.contents,
        )


def policy_pairs(policies: PolicyInput) -> list[tuple[str, str]]:
    if isinstance(policies, str):
        return [("<policies>", policies)] if policies.strip() else []
    pairs = []
    for item in policies:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
            raise TypeError("policies must be Cedar text or a sequence of (path, text) pairs")
        pairs.append((str(item[0]), item[1]))
    return pairs


def schema_fragment(schema: Mapping[str, Any] | None, path: str | None) -> Mapping[str, Any] | None:
    """Normalize a schema fragment to ``{"entityTypes", "commonTypes", "principalTypes"}``."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ConfigError("the schema declarations must be a JSON object", path=path)
    body: Mapping[str, Any] = schema
    keys = {"entityTypes", "commonTypes", "principalTypes", "actions"}
    if not set(schema) & keys and len(schema) == 1:
        (inner,) = schema.values()  # the namespaced form {"": {...}}
        if isinstance(inner, Mapping):
            body = inner
    unknown = set(body) - keys
    if unknown:
        raise ConfigError(f"unknown keys in the schema declarations: {sorted(unknown)}", path=path)
    if body.get("actions"):
        raise ConfigError(
            "the schema declarations may not declare actions: they are generated from the "
            "tool registry",
            path=path,
        )
    entity_types = body.get("entityTypes")
    if entity_types is not None and not isinstance(entity_types, Mapping):
        raise ConfigError("entityTypes must be an object", path=path)
    principal_types = body.get("principalTypes")
    if principal_types is not None and (
        not isinstance(principal_types, list)
        or not all(isinstance(p, str) for p in principal_types)
    ):
        raise ConfigError("principalTypes must be a list of entity type names", path=path)
    return {k: v for k, v in body.items() if k != "actions"}


def _json_file(text: str, path: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} not JSON: {exc.msg}".lstrip(), path=path, line=exc.lineno
        ) from None


def _signature(directory: Path, files: Sequence[Path]) -> tuple[Any, ...]:
    parts: list[Any] = []
    for path in [*files, directory / ENTITIES_FILE, directory / SCHEMA_FILE]:
        try:
            st = path.stat()
        except OSError:
            continue
        parts.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(parts)
