"""Engines are told apart only inside `cockpit.engines`: no other product module compares a
string with an engine's name, keys on one, lists them, or names an engine's metric."""

from __future__ import annotations

import pytest

from tests.support.engine_names import product_modules, violations
from tests.support.repo import REPO


def test_no_module_outside_the_adapters_names_an_engine() -> None:
    paths = list(product_modules())
    assert len(paths) > 40 and not any("engines" in p.parts for p in paths)
    found = [v for p in paths for v in violations(p.read_text(), str(p.relative_to(REPO)))]
    assert found == []


@pytest.mark.parametrize(
    "line",
    [
        'if dialect == "sglang":\n    pass',
        'kind = "vllm-legacy" if old else "vllm"\nok = kind != "vllm"',
        'if dialect in ("vllm", "vllm-legacy"):\n    pass',
        'notes = {"sglang": {}}',
        'notes = table["sglang"]',
        'notes = table.get("vllm-legacy", {})',
        'if name.startswith(("vllm:", "sglang:")):\n    pass',
        'metric = "sglang:num_running_reqs"',
        'escaped = "vllm_prompt_tokens_total"',
        """ENGINE_NAMES = '{__name__=~"(vllm|sglang)[:_].+"}'""",
        'DIALECTS = ("vllm", "sglang")',
        "Engine = Literal['auto', 'vllm']",
        'if "SGLang" in title:\n    pass',
    ],
)
def test_the_check_sees_a_module_that_names_an_engine(line: str) -> None:
    assert violations(line, "sample.py"), line


def test_prose_about_engines_is_no_violation() -> None:
    source = (
        '"""vLLM observes one ITL per step, SGLang one per token."""\n'
        "GLOSSARY = {'itl': 'in vLLM the step, in SGLang the token'}\n"
        "def f(dialect: str) -> str:\n"
        '    """Read as `vllm:` names or `sglang:` ones."""\n'
        "    return dialect\n"
    )
    assert violations(source, "sample.py") == []
