"""The peer for bench/ratelimit.py: inspect_ai (its adaptive concurrency, default settings) sends
``--samples`` one-turn generations to a rate-limited fake server. Runs in a venv of its own
with inspect_ai installed (never the project's), e.g.::

    python3 -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect_ai openai
    /tmp/inspect-venv/bin/python bench/inspect_ratelimit_peer.py --base-url http://…/v1 \\
        --model bench-peer --samples 624

bench/ratelimit.py starts it (``--inspect-python``) and reads the server's log; this script
prints one line, ``PEER samples=… errors=… wall_s=…``.
"""

import argparse
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True, help="the server's OpenAI base URL (…/v1)")
    parser.add_argument("--model", required=True)
    parser.add_argument("--samples", type=int, default=624)
    args = parser.parse_args()
    os.environ["BENCH_BASE_URL"] = args.base_url
    os.environ["BENCH_API_KEY"] = "bench-key"
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    task = Task(
        dataset=[Sample(input=f"Peer call {i}: please help.") for i in range(args.samples)],
        solver=generate(),
    )
    with tempfile.TemporaryDirectory() as log_dir:
        started = time.perf_counter()
        logs = eval(
            task,
            model=f"openai-api/bench/{args.model}",
            max_tokens=512,
            log_dir=log_dir,
            display="none",
            fail_on_error=False,
        )
        wall = time.perf_counter() - started
        samples = logs[0].samples or []  # read before the log directory goes
        errors = sum(1 for sample in samples if sample.error is not None)
    print(f"PEER samples={len(samples)} errors={errors} wall_s={wall:.1f}", flush=True)


if __name__ == "__main__":
    main()
