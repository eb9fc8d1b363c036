"""scripts/bench-smoke's checks: what makes a benchmark's output fail.

The smoke runs themselves are CI's (scripts/test-all); these tests give the
checker outputs with one thing wrong each and check that it says what.
"""

import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    loader = importlib.machinery.SourceFileLoader("bench_smoke", str(ROOT / "scripts" / "bench-smoke"))
    spec = importlib.util.spec_from_loader("bench_smoke", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


smoke = load_script()

KEYS = """
# a comment
[alpha]
first_ms
ratio            nullable
noisy_*          optional
cluster_ratio    cluster
[remote]
itsme.median_ms
median_ratio
"""


@pytest.fixture
def lists(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text(KEYS)
    return smoke.read_key_lists(path)


def output(*objects, after=""):
    lines = ["building...", "alpha suite"]
    lines += [json.dumps(o) for o in objects]
    return "\n".join(lines) + "\n" + after


def test_the_repository_key_list_reads_and_names_every_suite():
    lists = smoke.read_key_lists()
    suites = {suite for _, _, names, _ in smoke.commands("release") for suite in names}
    assert suites == set(lists)
    for keys in lists.values():
        assert keys.keys, f"[{keys.suite}] lists no key"


def test_every_key_is_a_pass(lists):
    good = {"suite": "alpha", "first_ms": 1.5, "ratio": None}
    assert smoke.check_output(output(good), ["alpha"], lists) == []


def test_a_missing_key_fails(lists):
    problems = smoke.check_output(output({"suite": "alpha", "ratio": 2}), ["alpha"], lists)
    assert problems == ["alpha: key first_ms is missing"]


def test_a_key_not_in_the_list_fails(lists):
    problems = smoke.check_output(output({"suite": "alpha", "first_ms": 1, "ratio": 2, "new_ms": 3}), ["alpha"], lists)
    assert len(problems) == 1 and "key new_ms is not in scripts/bench-keys.txt" in problems[0]


def test_null_only_where_allowed_and_no_other_non_number(lists):
    assert smoke.check_output(output({"suite": "alpha", "first_ms": None, "ratio": 2}), ["alpha"], lists) == [
        "alpha: key first_ms is null (not a finite number)"
    ]
    problems = smoke.check_output(output({"suite": "alpha", "first_ms": "fast", "ratio": True}), ["alpha"], lists)
    assert problems == ["alpha: key first_ms is 'fast', not a finite number", "alpha: key ratio is True, not a finite number"]


def test_optional_patterns_and_cluster_keys(lists):
    figures = {"suite": "alpha", "first_ms": 1, "ratio": 2, "noisy_first_ms": 1}
    assert smoke.check_output(output(figures), ["alpha"], lists) == []
    assert smoke.check_output(output(figures), ["alpha"], lists, cluster=True) == ["alpha: key cluster_ratio is missing"]
    figures["cluster_ratio"] = 0.9
    assert smoke.check_output(output(figures), ["alpha"], lists, cluster=True) == []


def test_nested_objects_are_keys_with_dots(lists):
    good = {"suite": "remote", "itsme": {"median_ms": 9.1}, "median_ratio": 5.5}
    assert smoke.check_output(output(good), ["remote"], lists) == []
    problems = smoke.check_output(output({"suite": "remote", "itsme": {"p99_ms": 9}, "median_ratio": 5}), ["remote"], lists)
    assert problems[0] == "remote: key itsme.median_ms is missing"
    assert "itsme.p99_ms is not in" in problems[1]


def test_the_json_line_must_be_last_and_every_suite_there_in_order(lists):
    good = {"suite": "alpha", "first_ms": 1, "ratio": 2}
    assert smoke.check_output(output(good, after="done\n"), ["alpha"], lists) == ["its last line is not its JSON line"]
    assert "not of ['alpha', 'remote']" in smoke.check_output(output(good), ["alpha", "remote"], lists)[0]
    assert "no suite" in smoke.check_output("Traceback (most recent call last):\n", ["alpha"], lists)[0]


def test_a_malformed_key_list_is_refused(tmp_path):
    path = tmp_path / "keys.txt"
    for text in ["loose_key\n", "[alpha]\nkey maybe\n", "[alpha]\nkey\nkey\n"]:
        path.write_text(text)
        with pytest.raises(ValueError):
            smoke.read_key_lists(path)
