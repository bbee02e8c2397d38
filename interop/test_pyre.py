"""vLLM and SGLang match a config's "re:" entries and GPTQ dynamic keys with
Python's re.match; mtpconv evaluates only the syntax Python's re and Go's RE2
read alike (convert/targets/hf/pyre.go). This runs Python's re over the case
table the Go test (TestPythonPatterns) runs mtpconv's evaluator over, so the
two cannot drift: the table's "python" column is Python's own answer, every
pattern mtpconv judges gets Python's verdict, every pattern it calls invalid
Python rejects."""
import json
import re
import warnings

import pytest

from conftest import ROOT

CASES = json.loads((ROOT / "testdata" / "pyre_cases.json").read_text())


def python_match(pattern, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # "possible nested set": still compiled
        try:
            return bool(re.match(pattern, name))
        except re.error:
            return "error"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['pattern']!r}-{c['mtpconv']}" for c in CASES])
def test_case_table_is_pythons(case):
    got = python_match(case["pattern"], case["name"])
    assert got == case["python"], case["why"]
    if case["mtpconv"] in ("match", "nomatch"):
        assert got == (case["mtpconv"] == "match"), case["why"]
    if case["mtpconv"] == "invalid":
        assert got == "error", case["why"]


def test_issue_cases_are_in_the_table():
    verdicts = {c["pattern"]: c["mtpconv"] for c in CASES}
    assert verdicts["^mtp[[:punct:]].*"] == "unjudged"
    assert verdicts["^mtp.{,3}"] == "unjudged"
    assert any(p.endswith("\\z") and v == "invalid" for p, v in verdicts.items())
