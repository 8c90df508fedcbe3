import inspect

import pytest

import clearance.guardrails as guardrails
import clearance.toolsets as toolsets
from clearance.guardrails import base

BUILT_INS = [
    guardrails.PathScope,
    guardrails.UrlAllowlist,
    guardrails.ArgumentSecretScanner,
    guardrails.ResultSecretScanner,
    guardrails.ArgumentPiiRedactor,
    guardrails.ResultPiiRedactor,
    guardrails.ArgumentSizeLimit,
    guardrails.ResultSizeLimit,
    guardrails.ArgumentPattern,
    guardrails.ResultPattern,
]


def test_all_names_exist_and_base_is_reexported() -> None:
    for module in (guardrails, toolsets):
        for name in module.__all__:
            assert hasattr(module, name), name
    assert set(base.__all__) <= set(guardrails.__all__)


def test_every_exception_is_exported() -> None:
    exceptions = [
        name
        for name, value in vars(guardrails).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    ]
    assert exceptions and set(exceptions) <= set(guardrails.__all__)


@pytest.mark.parametrize("cls", BUILT_INS, ids=lambda c: c.__name__)
def test_built_ins_are_guardrails_with_an_example(cls: type) -> None:
    assert issubclass(cls, guardrails.ArgumentGuardrail | guardrails.ResultGuardrail)
    assert "Example" in (cls.__doc__ or "")
    signature = inspect.signature(cls)
    for option in ("tools", "fields", "advisory"):
        assert option in signature.parameters or "options" in signature.parameters
        if option in signature.parameters:
            assert signature.parameters[option].kind is inspect.Parameter.KEYWORD_ONLY
