"""Extract AgentDojo's four suites into plain JSON: tools, the user's environment, and the
ground-truth tool calls of every user task (benign) and injection task (attack).

Run it with AgentDojo installed (it ships the suites offline). AgentDojo pulls in a large
dependency tree, including a pytest plugin (langsmith), so keep it out of the project's
environment::

    python -m venv /tmp/agentdojo-venv
    /tmp/agentdojo-venv/bin/pip install agentdojo
    /tmp/agentdojo-venv/bin/python benchmarks/agentdojo/extract.py [--version v1.2.2]

It writes ``benchmarks/agentdojo/data/<suite>.json``; ``run.py`` reads only those files.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
READ_ONLY_PREFIXES = ("get_", "search_", "read_", "list_", "check_")
"""Tools whose name starts like this only read (AgentDojo has no read-only flag)."""


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _calls(function_calls: Any) -> list[dict[str, Any]]:
    out = []
    for call in function_calls:
        args = dict(call.args)
        if any(type(v).__name__ == "FunctionCall" for v in args.values()):
            raise ValueError(f"nested function call in {call.function}")
        out.append({"function": call.function, "arguments": _jsonable(args)})
    return out


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
        user_tasks = []
        for task_id, task in suite.user_tasks.items():
            env = task.init_environment(environment.model_copy(deep=True))
            user_tasks.append(
                {"id": task_id, "prompt": task.PROMPT, "calls": _calls(task.ground_truth(env))}
            )
        injection_tasks = []
        for task_id, task in suite.injection_tasks.items():
            calls = _calls(task.ground_truth(environment.model_copy(deep=True)))
            injection_tasks.append({"id": task_id, "goal": task.GOAL, "calls": calls})
        data = {
            "suite": name,
            "agentdojo_version": version,
            "tools": tools,
            "user_tasks": user_tasks,
            "injection_tasks": injection_tasks,
            "environment": _jsonable(environment.model_dump(mode="json")),
        }
        path = HERE / "data" / f"{name}.json"
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(
            f"{name}: {len(tools)} tools, {len(user_tasks)} user tasks, "
            f"{len(injection_tasks)} injection tasks -> {path}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="v1.2.2", help="AgentDojo benchmark version")
    extract(parser.parse_args().version)


if __name__ == "__main__":
    main()
