"""SGLang's start-up warm-up request skipped by default (sglang_server_skip_warmup): the suite's
proving generation does its job; the flag is one SGLang 0.5.23 parses, and false keeps the warm-up."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_sglang_argv import BASELINE, HEAD, render, server

from analysis.engines.base import SettingError

DEFAULTS = Path(__file__).resolve().parents[2] / "roles/sglang_server/defaults/main.yml"


def test_the_warm_up_is_skipped_by_default_and_kept_on_request() -> None:
    default = yaml.safe_load(DEFAULTS.read_text())["sglang_server_skip_warmup"]
    assert default is True
    assert render(BASELINE, server(skip_warmup=default)) == [*HEAD, "--skip-server-warmup"]
    assert render(BASELINE, server(skip_warmup=False)) == HEAD
    with pytest.raises(SettingError, match="skip_warmup: must be true or false"):
        render(BASELINE, server(skip_warmup="no"))
