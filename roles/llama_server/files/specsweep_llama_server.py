"""llama.cpp's HTTP server, started from llama-server's own command line.

The prebuilt `llama-server` wheels on PyPI are compiled for one CPU family and die
with SIGILL elsewhere; the `xllamacpp` wheel carries the same server with runtime
CPU dispatch but has no CLI. This file is that CLI: it accepts the subset of
llama-server flags the suite renders, runs the server in this process (so the
pid the launcher records is the server's), and exits when told to stop.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def parse_args(argv: list[str]) -> argparse.Namespace:
    """llama-server's flags, spelled as llama-server spells them."""
    p = argparse.ArgumentParser(prog="specsweep-llama-server")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    # Like llama-server: the flag wins, else LLAMA_ARG_THREADS (where env profiles set it).
    p.add_argument("-t", "--threads", type=int, default=int(os.environ.get("LLAMA_ARG_THREADS", "1")))
    p.add_argument("-c", "--ctx-size", type=int, default=2048)
    p.add_argument("-np", "--parallel", type=int, default=1)
    p.add_argument("--metrics", action="store_true")
    p.add_argument("--spec-type", choices=["none", "ngram-mod"], default="none")
    p.add_argument("--spec-ngram-mod-n-match", type=int, default=4)
    p.add_argument("--spec-ngram-mod-n-min", type=int, default=1)
    p.add_argument("--spec-ngram-mod-n-max", type=int, default=8)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Start the server, then block until SIGTERM/SIGINT."""
    args = parse_args(argv)
    import xllamacpp as xl  # imported late so --help works without the wheel

    params = xl.CommonParams()
    params.model.path = args.model
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = args.metrics
    if args.spec_type == "ngram-mod":
        params.speculative.types = [xl.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_MOD]
        mod = params.speculative.ngram_mod
        mod.n_match = args.spec_ngram_mod_n_match
        mod.n_min = args.spec_ngram_mod_n_min
        mod.n_max = args.spec_ngram_mod_n_max

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        server = xl.Server(params)
    except Exception as exc:
        print(f"specsweep-llama-server: failed to start: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"specsweep-llama-server: listening on {server.listening_address}", flush=True)
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
