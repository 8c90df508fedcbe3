"""The questions ``clearance policy analyze`` asks the solver, and the confirmation of each
answer by Cedar.

* *impossible*: no request of any tool satisfies the policy (``when { false }``, two
  different values for one attribute, a scope no tool has);
* *shadowed*: a permit that can apply, but never without a forbid applying too (so it
  never allows anything);
* *loosens* / *tightens*: between two sets, a request the new set decides more leniently
  (deny → ask, deny → allow, ask → allow) or more strictly (allow → ask, allow → deny,
  ask → deny) than the old one.

Each answer that comes with a request (a shadowed permit's match, each change) is decided
again by Cedar (the loaded set's engine, as a live call is) before it is reported: the
decisions must be what the solver said, or the analysis stops with an internal error
rather than print a request that does not show what it claims.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import z3

from clearance.errors import ConfigError, PolicyError
from clearance.policy.base import Verdict
from clearance.policy.cedar._loading import load_set
from clearance.policy.cedar._sources import PolicyDirectory
from clearance.policy.cedar._validation import policy_tree
from clearance.policy.cedar.analysis._world import Request, SetView, ToolWorld
from clearance.policy.cedar.engine import CedarEngine
from clearance.types import Principal, ToolLike

__all__ = [
    "Analysis",
    "Finding",
    "FindingKind",
    "analyze_directory",
    "compare_directories",
    "decide",
    "load_view",
]

FindingKind = Literal["impossible", "shadowed", "loosens", "tightens", "undecided"]

_RANK = {"deny": 0, "ask": 1, "allow": 2}
_CHANGES = [(a, b) for a in _RANK for b in _RANK if a != b]
_TIMEOUT_MS = 60_000


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the analysis proved (or could not decide)."""

    kind: FindingKind
    message: str
    policy: str | None = None
    """The policy's ``@id`` (or Cedar id), for impossible and shadowed policies."""
    location: str | None = None
    """``path:line`` of that policy."""
    request: Request | None = None
    """A request that shows it, decided by Cedar as described."""
    change: str | None = None
    """``old->new`` verdicts, for loosens and tightens."""
    by: tuple[str, ...] = ()
    """The forbids that shadow a permit."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """What one run found."""

    policies: int
    tools: int
    findings: tuple[Finding, ...]
    seconds: float
    applies: dict[str, bool] = field(default_factory=dict)
    """Per policy (``@id``): whether some request satisfies it."""

    def of(self, *kinds: FindingKind) -> list[Finding]:
        return [f for f in self.findings if f.kind in kinds]


def load_view(directory: str | Path, tools: Sequence[ToolLike]) -> SetView:
    """Load a policy directory against ``tools`` as ``clearance policy validate`` does.

    Raises:
        ConfigError: the directory cannot be read or the schema not generated.
        PolicyError: a policy does not parse or validate, or is a template link (the
            analysis does not encode templates).
    """
    sources = PolicyDirectory(Path(directory), None).read()
    loaded = load_set(sources, tools, namespace="", principal_types=None)
    for info in loaded.engine.policies:
        if info.kind == "link":
            raise PolicyError(
                f"policy {info.label}: template links are outside what the analysis encodes",
                path=info.path,
                line=info.line,
                policy_id=info.label,
            )
    return SetView.of(loaded, policy_tree(loaded.engine, sources.policies), tools)


def _worlds(views: Sequence[SetView], tools: Sequence[ToolLike]) -> list[ToolWorld]:
    return [ToolWorld(tool, views, n) for n, tool in enumerate(tools)]


def _check(world: ToolWorld, *formulas: Any) -> z3.ModelRef | Literal["unknown"] | None:
    solver = z3.Solver()
    solver.set("timeout", _TIMEOUT_MS)
    solver.add(*world.facts, *formulas)
    answer = solver.check()
    if answer == z3.sat:
        return solver.model()
    return None if answer == z3.unsat else "unknown"


def decide(view: SetView, request: Request) -> Verdict:
    """Cedar's verdict on ``request`` under ``view``'s policies, as a live call gets it."""
    uid = request.principal["uid"]
    response = view.loaded.engine.is_authorized(
        uid, request.action, request.resource, request.context, entities=[request.principal]
    )
    return view.loaded.verdicts.verdict(response, Principal(uid["type"], uid["id"]), request.tool)


def _satisfies_alone(view: SetView, policy_id: str, request: Request) -> bool:
    """Whether Cedar finds the policy satisfied by ``request``, evaluated on its own."""
    info = view.loaded.engine.policy(policy_id)
    engine = CedarEngine([(info.path or "policy", info.text or "")], entities=view.entities)
    uid = request.principal["uid"]
    response = engine.is_authorized(
        uid, request.action, request.resource, request.context, entities=[request.principal]
    )
    return bool(response.reasons) and not response.errors


def _mismatch(what: str, request: Request, verdict: Verdict) -> PolicyError:
    return PolicyError(
        f"internal error: the analysis says {what}, but Cedar decides {verdict.effect} "
        f"on the request it found ({request.tool}, {request.principal['uid']}, context "
        f"{request.context}); nothing is reported from an answer Cedar does not confirm"
    )


def analyze_directory(
    directory: str | Path, tools: Sequence[ToolLike], *, shadows: bool = True
) -> Analysis:
    """Which policies of ``directory`` can never apply, and (``shadows``) which permits
    forbids shadow.

    Raises:
        ConfigError, PolicyError: see :func:`load_view`; PolicyError also when a policy
            uses a construct outside the encoded subset (naming it, with its file:line).
    """
    start = time.perf_counter()
    view = load_view(directory, tools)
    worlds = _worlds([view], tools)
    findings: list[Finding] = []
    applies: dict[str, bool] = {}
    for info in view.infos:
        relevant = [w for w in worlds if info.id in w.encoded[0]]
        example = None
        for world in relevant:
            found = _check(world, world.applies(0, info.id))
            if found is not None:
                example = found
                break
        applies[info.label] = example is not None
        if example is None:
            findings.append(
                Finding(
                    "impossible",
                    f"{info.effect} {info.label} can never apply: no request of any tool "
                    "satisfies its scope and conditions",
                    info.label,
                    info.location,
                )
            )
        elif shadows and info.effect == "permit":
            shadow = _shadowed(view, info.id, info.label, info.location, relevant)
            if shadow is not None:
                findings.append(shadow)
    return Analysis(
        len(view.infos), len(tools), tuple(findings), time.perf_counter() - start, applies
    )


def _shadowed(
    view: SetView, policy_id: str, label: str, location: str | None, worlds: list[ToolWorld]
) -> Finding | None:
    """A finding when every request the permit matches is denied by a forbid."""
    for world in worlds:
        free = _check(world, world.applies(0, policy_id), z3.Not(world.forbidden(0)))
        if free is not None:
            return None  # it allows (or asks) something, or the solver could not tell
    for world in worlds:
        found = _check(world, world.applies(0, policy_id))
        if isinstance(found, z3.ModelRef):
            request = world.request(found)
            by = tuple(
                i.label
                for i in view.infos
                if i.effect == "forbid"
                and i.id in world.encoded[0]
                and _check(world, world.applies(0, policy_id), world.hits(0, i.id)) is not None
            )
            verdict = decide(view, request)
            if verdict.effect != "deny" or not _satisfies_alone(view, policy_id, request):
                raise _mismatch(f"permit {label} applies and a forbid denies", request, verdict)
            return Finding(
                "shadowed",
                f"permit {label} never allows anything: every request it matches is "
                f"denied by {', '.join(by)}",
                label,
                location,
                request,
                by=by,
            )
    return None


def compare_directories(old: str | Path, new: str | Path, tools: Sequence[ToolLike]) -> Analysis:
    """Every tool on which the ``new`` set decides some request differently from ``old``:
    one request per tool and kind of change, confirmed by Cedar under both sets.

    Raises:
        ConfigError, PolicyError: see :func:`analyze_directory`; ConfigError also when the
            two sets declare different principal types.
    """
    start = time.perf_counter()
    views = [load_view(old, tools), load_view(new, tools)]
    if views[0].loaded.model.principal_types != views[1].loaded.model.principal_types:
        raise ConfigError(
            "the two policy sets declare different principal types "
            f"({', '.join(views[0].loaded.model.principal_types)} and "
            f"{', '.join(views[1].loaded.model.principal_types)}); compare sets with the "
            "same schema.json"
        )
    findings: list[Finding] = []
    for world in _worlds(views, tools):
        if not (world.relevant(0) or world.relevant(1)):
            continue  # neither set permits anything here: both deny every request
        before, after = world.verdicts(0), world.verdicts(1)
        same = z3.And(*(before[v] == after[v] for v in _RANK))
        if _check(world, z3.Not(same)) is None:
            continue  # one query proves the tool unchanged; the six kinds need not be asked
        for was, now in _CHANGES:
            found = _check(world, before[was], after[now])
            kind: FindingKind = "loosens" if _RANK[now] > _RANK[was] else "tightens"
            change = f"{was}->{now}"
            tool = world.tool.qualified_name
            if found == "unknown":
                findings.append(
                    Finding(
                        "undecided", f"{tool}: the solver could not decide {change}", change=change
                    )
                )
                continue
            if found is None:
                continue
            request = world.request(found, 0)
            then, later = decide(views[0], request), decide(views[1], world.request(found, 1))
            if (then.effect, later.effect) != (was, now):
                raise _mismatch(f"{change} on {tool}", request, later)
            findings.append(
                Finding(
                    kind,
                    f"{tool}: a call the current set decides {was} is decided {now} by the proposed set",
                    request=request,
                    change=change,
                )
            )
    policies = len(views[1].infos)
    return Analysis(policies, len(tools), tuple(findings), time.perf_counter() - start)
