"""bench/vllm_cpu.py's parts that need no vLLM: the dummy model's files, the inventory it writes (the
sweep's own plan renders it), and the table it prints (the run itself needs vllm-cpu: not in CI)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_cpu_bench", REPO / "bench" / "vllm_cpu.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_the_dummy_model_is_a_llama_vllms_cpu_attention_takes_with_the_prompts_words(tmp_path: Path) -> None:
    bench.write_model(tmp_path, bench.TEST_PROMPTS)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # CPU attention refuses 16
    model = json.loads((tmp_path / "tokenizer.json").read_text())["model"]
    vocab = model["vocab"]
    assert model["type"] == "WordLevel" and len(vocab) == config["vocab_size"] == len(set(vocab.values()))
    assert [vocab[t] for t in ("<unk>", "<s>", "</s>")] == [0, config["bos_token_id"], config["eos_token_id"]]
    assert {"gpu-01", "web-02", "port:"} <= set(vocab)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["eos_token"] == "</s>"


def test_its_inventory_plans_the_module_entry_with_ngram_drafts_on_a_dummy_model(tmp_path: Path) -> None:
    """The sweep's plan (controller only, no host touched) of the inventory the bench writes."""
    args = argparse.Namespace(vllm_python=Path("/venv/bin/python"), vllm_version="0.32.0", concurrency=[1, 2],
                              prompts=bench.TEST_PROMPTS, health_timeout_s=900)  # fmt: skip
    inventory = bench.write_inventory(args, tmp_path)
    playbook = Path(sys.executable).parent / "ansible-playbook"
    argv = [str(playbook), "sweep.yml", "-i", str(inventory), "-e", "plan_only=true", "-e", "steps=1,2",
            "-e", "concurrency=1,2", "-e", f"results_dir={tmp_path}", "-e", "sweep_id=plan"]  # fmt: skip
    res = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=300, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    plan = json.loads((tmp_path / "plan" / "plan.json").read_text())
    entries = plan["hosts"]["localhost"]["entries"]
    head = ["/venv/bin/python", "-m", "vllm.entrypoints.launchers.api_server.entry", "--model"]
    assert [e["argv"][:4] for e in entries] == [head] * 3
    assert all(" ".join(e["argv"]).endswith("--load-format dummy --max-model-len 512 --dtype bfloat16")
               for e in entries)  # fmt: skip
    specs = [json.loads(e["argv"][e["argv"].index("--speculative-config") + 1]) for e in entries[1:]]
    assert specs == [{"method": "ngram", "num_speculative_tokens": n, "prompt_lookup_min": 2,
                      "prompt_lookup_max": 3} for n in (1, 2)]  # fmt: skip


def test_the_printed_table_is_the_sweeps_own_up_to_the_recap() -> None:
    output = "\n".join([
        "[localhost] s2: recorded",
        "sweep vllm-cpu | host localhost | vllm /m | concurrency 1",
        "   config    tok/s",
        "*  s2        12.0",
        "",
        "PLAY RECAP ***",
        "localhost : ok=86",
    ])  # fmt: skip
    assert bench.table(output).splitlines() == output.splitlines()[1:4]
    assert bench.table("PLAY RECAP") == "(the sweep printed no table)"
