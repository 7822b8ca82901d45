"""analysis/sweep/hostvars.py: a host's variables checked against the roles' argument specs, by source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from analysis.sweep import hostvars

OPTIONS = hostvars.role_options(Path(__file__).resolve().parents[2] / "roles")


def check(layers: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """hostvars.check of gpu-1, each value resolving to the first layer's (no templates here)."""

    def resolve(name: str) -> Any:
        return next(found[name] for _, found in layers if name in found)

    return hostvars.check("gpu-1", layers, OPTIONS, resolve)


def test_the_role_options_come_from_every_roles_argument_specs() -> None:
    assert OPTIONS["llama_server_port"]["type"] == "int"
    assert OPTIONS["server_process_launcher"]["choices"] == ["nohup", "systemd"]
    assert "benchmark_request_timeout_s" in OPTIONS and "nightly_schedule_state" in OPTIONS


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("llama_server_port", "eighty", "expected a whole number"),
        ("llama_server_port", 0, "must be at least 1"),
        ("llama_server_port", 70000, "must be at most 65535"),
        ("benchmark_request_timeout_s", 0, "must be at least 1"),
        ("llama_server_threads", -1, "must be at least 0"),
        ("sglang_server_mem_fraction_static", "most", "expected a number"),
        ("llama_server_metrics", "maybe", "expected true or false"),
        ("llama_server_extra_args", "--foo", "expected a list"),
        ("llama_server_env", ["A=1"], "expected a mapping"),
        ("server_process_launcher", "docker", "expected one of nohup, systemd"),
        ("llama_server_model_path", ["/a", "/b"], "expected a string"),
    ],
)
def test_a_bad_value_is_named_with_its_source_and_why(name: str, value: Any, problem: str) -> None:
    assert check([("-e", {}), ("host vars of gpu-1", {name: value})]) == [
        f"{name}: {value!r} from host vars of gpu-1: {problem}"
    ]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("llama_server_port", "8080"),  # -e key=value gives strings
        ("llama_server_port", 8080),
        ("wait_for_health_poll_interval_s", 0.25),
        ("llama_server_metrics", "yes"),
        ("sglang_server_nnodes", None),  # unset
        ("wait_for_health_stall_s", 0),  # 0 turns the stall check off
        ("server_process_launcher", "systemd"),
    ],
)
def test_a_good_value_passes(name: str, value: Any) -> None:
    assert check([("-e", {}), ("group vars of gpu", {name: value})]) == []


def test_the_source_is_the_layer_that_wins() -> None:
    layers = [("-e", {}), ("host vars of gpu-1", {"llama_server_port": "x"}),
              ("group vars of gpu", {"llama_server_port": 8080})]  # fmt: skip
    assert check(layers) == ["llama_server_port: 'x' from host vars of gpu-1: expected a whole number"]
    assert check([("-e", {"llama_server_port": 8081}), *layers[1:]]) == []


def test_sweep_settings_and_what_the_sweep_sets_are_refused_in_the_inventory_not_ignored() -> None:
    # Refused even where -e gives the same name: the inventory's value would still be ignored.
    layers = [("-e", {"repeats": 2, "benchmark_repeats": 5, "steps": "1"}),
              ("host vars of gpu-1", {"steps": "two", "benchmark_concurrency": 0}),
              ("group vars of gpu", {"lease_s": 60, "specsweep_engine": "sglang"})]  # fmt: skip
    assert check(layers) == [
        "benchmark_concurrency: 0 from host vars of gpu-1 is set by the sweep itself: use -e concurrency=... "
        "(refused, not ignored)",
        "lease_s: 60 from group vars of gpu is a sweep setting, read from -e only: use -e lease_s=... "
        "(refused, not ignored)",
        "steps: 'two' from host vars of gpu-1 is a sweep setting, read from -e only: use -e steps=... "
        "(refused, not ignored)",
    ]


def test_a_value_that_cannot_be_rendered_is_named() -> None:
    def resolve(name: str) -> Any:
        raise ValueError("'undefined_thing' is undefined")

    layers = [("-e", {}), ("group vars of gpu", {"llama_server_port": "{{ undefined_thing }}"})]
    assert hostvars.check("gpu-1", layers, OPTIONS, resolve) == [
        "llama_server_port: from group vars of gpu, cannot be rendered for gpu-1: "
        "'undefined_thing' is undefined"
    ]
