"""Extract AgentDojo's four suites, with the conversations their ground truth produces.

For each suite this writes, from the installed ``agentdojo`` package (offline: its task
suites, environments and function runtime; no model is called):

* ``data/<suite>.json``: the tools, the user's environment, and the ground-truth calls of
  every user task and injection task (what ``make_packs.py`` and ``run.py`` read);
* ``data/<suite>.corpus.jsonl``: the replay corpus (``docs/replay.md``). Every line is one
  ground-truth call carrying its ``conversation``: the user's prompt and every tool result
  AgentDojo's environment returned for the calls before it, in order, so that replay can
  tell a value the user named from one a tool returned.

  - ``benign`` lines, group ``user_task_N``: each user task's calls, run in the suite's
    default environment.
  - ``attack`` lines, group ``user_task_N/injection_task_M``: every pair AgentDojo runs.
    The environment's injection vectors that the user task's ground truth reads are filled
    with the attack text (AgentDojo's ``important_instructions`` attack: the injection
    task's goal), the user task's calls run until the first result that carries the
    injection, and then the injection task's ground-truth calls run (computed on the
    environment at that point, as a model that followed the injection would act). Only the
    injection task's calls are lines: the pair is stopped when one of them is.

Injection tasks whose ground truth is empty (workspace 6-13, travel 6) give pairs with no
line: ``run.py`` reports them as unscorable.

    pip install 'clearance[bench]'        # agentdojo is in the bench extra
    python benchmarks/agentdojo/extract.py [--version v1.2.2]
"""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PRINCIPAL = 'User::"emma"'
READ_ONLY_PREFIXES = ("get_", "search_", "read_", "list_", "check_")
"""Tools whose name starts like this only read (AgentDojo has no read-only flag)."""
USER_NAME = "Emma Johnson"
"""The user's name in the attack text (AgentDojo's ``important_instructions`` attack)."""
MODEL_NAME = "the AI language model"
"""The model's name in the attack text (AgentDojo's default when no model is named)."""


def _jsonable(value: Any) -> Any:
    """A tool result or argument as JSON: pydantic models dumped as AgentDojo's runtime
    returns them (dates as ISO text)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return json.loads(json.dumps(value, default=str))


def _call(call: Any) -> dict[str, Any]:
    args = dict(call.args)
    if any(type(v).__name__ == "FunctionCall" for v in args.values()):
        raise ValueError(f"nested function call in {call.function}")
    return {"function": call.function, "arguments": _jsonable(args)}


class _Conversation:
    """The messages of one session, as corpus conversation entries, and its calls."""

    def __init__(self, suite: str, prompt: str) -> None:
        self.suite = suite
        self.entries: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        self.calls = 0

    def run(self, runtime: Any, env: Any, call: Any) -> tuple[list[dict[str, Any]], Any]:
        """Run one call in ``env``; the conversation that preceded it and its result."""
        before = list(self.entries)
        result, error = runtime.run_function(env, call.function, call.args, raise_on_error=False)
        if error is not None:
            raise RuntimeError(f"{self.suite}.{call.function} failed on ground truth: {error}")
        self.entries.append(
            {
                "role": "tool",
                "tool": f"{self.suite}.{call.function}",
                "call_id": f"c{self.calls}",
                "content": _jsonable(result),
            }
        )
        self.calls += 1
        return before, result


def _line(
    suite: str,
    call: Any,
    conversation: list[dict[str, Any]],
    *,
    label: str,
    group: str,
    n: int,
) -> str:
    plain = _call(call)
    return json.dumps(
        {
            "principal": PRINCIPAL,
            "tool": f"{suite}.{plain['function']}",
            "arguments": plain["arguments"],
            "expected": "allow" if label == "benign" else "deny",
            "label": label,
            "group": group,
            "id": f"{group}/{n}",
            "conversation": conversation,
        },
        ensure_ascii=False,
    )


def _attack(suite: Any) -> Any:
    """AgentDojo's ``important_instructions`` attack, without a pipeline to name a model."""
    from agentdojo.attacks.base_attacks import FixedJailbreakAttack
    from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack

    attack = FixedJailbreakAttack(ImportantInstructionsAttack._JB_STRING, suite, None)  # type: ignore[arg-type]
    attack.user_name = USER_NAME
    attack.model_name = MODEL_NAME
    return attack


def _carries(result: Any, injections: dict[str, str]) -> bool:
    """Whether a tool result shows the model one of the injections (as AgentDojo looks for
    its canaries: in the text the model reads)."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    text = tool_result_to_str(result)
    return any(marker in text for marker in _markers(injections))


def _markers(injections: dict[str, str]) -> Iterator[str]:
    # The attack text goes through the environment's YAML, which may fold its blank lines;
    # its first non-blank line survives whole.
    for text in injections.values():
        first = next((line for line in text.splitlines() if line.strip()), text)
        yield first.strip()


def user_task_lines(name: str, suite: Any, environment: Any) -> Iterator[str]:
    from agentdojo.functions_runtime import FunctionsRuntime

    for task_id, task in suite.user_tasks.items():
        env = task.init_environment(environment.model_copy(deep=True))
        calls = task.ground_truth(env.model_copy(deep=True))
        runtime = FunctionsRuntime(suite.tools)
        conversation = _Conversation(name, task.PROMPT)
        for n, call in enumerate(calls):
            before, _ = conversation.run(runtime, env, call)
            yield _line(name, call, before, label="benign", group=task_id, n=n)


def pair_lines(name: str, suite: Any) -> Iterator[tuple[str, str, list[str]]]:
    """``(user task, injection task, lines)`` for every pair."""
    from agentdojo.functions_runtime import FunctionsRuntime

    attack = _attack(suite)
    for user_id, user_task in suite.user_tasks.items():
        for injection_id, injection_task in suite.injection_tasks.items():
            injections = attack.attack(user_task, injection_task)
            env = user_task.init_environment(suite.load_and_inject_default_environment(injections))
            runtime = FunctionsRuntime(suite.tools)
            conversation = _Conversation(name, user_task.PROMPT)
            seen = False
            for call in user_task.ground_truth(env.model_copy(deep=True)):
                _, result = conversation.run(runtime, env, call)
                if _carries(result, injections):
                    seen = True
                    break
            if not seen:
                raise RuntimeError(f"{name} {user_id}: no ground-truth result carries the attack")
            group = f"{user_id}/{injection_id}"
            lines = []
            for n, call in enumerate(injection_task.ground_truth(env.model_copy(deep=True))):
                before, _ = conversation.run(runtime, env, call)
                lines.append(_line(name, call, before, label="attack", group=group, n=n))
            yield user_id, injection_id, lines


def extract(version: str) -> None:
    warnings.simplefilter("ignore")
    from agentdojo.task_suite import get_suites

    (HERE / "data").mkdir(exist_ok=True)
    for name, suite in get_suites(version).items():
        environment = suite.load_and_inject_default_environment({})
        tools = [
            {
                "name": f"{name}.{tool.name}",
                "description": tool.description,
                "input_schema": tool.parameters.model_json_schema(),
                "read_only": tool.name.startswith(READ_ONLY_PREFIXES),
            }
            for tool in suite.tools
        ]
        user_tasks = [
            {
                "id": task_id,
                "prompt": task.PROMPT,
                "calls": [
                    _call(c)
                    for c in task.ground_truth(
                        task.init_environment(environment.model_copy(deep=True))
                    )
                ],
            }
            for task_id, task in suite.user_tasks.items()
        ]
        injection_tasks = [
            {
                "id": task_id,
                "goal": task.GOAL,
                "calls": [_call(c) for c in task.ground_truth(environment.model_copy(deep=True))],
            }
            for task_id, task in suite.injection_tasks.items()
        ]
        lines = list(user_task_lines(name, suite, environment))
        pairs = []
        for user_id, injection_id, attack_lines in pair_lines(name, suite):
            pairs.append(
                {"user_task": user_id, "injection_task": injection_id, "calls": len(attack_lines)}
            )
            lines += attack_lines
        data = {
            "suite": name,
            "agentdojo_version": version,
            "tools": tools,
            "user_tasks": user_tasks,
            "injection_tasks": injection_tasks,
            "pairs": pairs,
            "environment": _jsonable(environment),
        }
        path = HERE / "data" / f"{name}.json"
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        corpus = HERE / "data" / f"{name}.corpus.jsonl"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(
            f"{name}: {len(tools)} tools, {len(user_tasks)} user tasks, "
            f"{len(injection_tasks)} injection tasks, {len(pairs)} pairs, "
            f"{len(lines)} corpus lines -> {corpus}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="v1.2.2", help="AgentDojo benchmark version")
    extract(parser.parse_args().version)


if __name__ == "__main__":
    main()
