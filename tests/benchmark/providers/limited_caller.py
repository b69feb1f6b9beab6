"""A worker process for test_ratelimit_processes.py: ``--calls`` chat calls, ``--in-flight`` at
once on one event loop, through the endpoint's provider (its limiter shared through
``REDIS_URL``), then one line ``OK <succeeded> <failed>``. ``--max-concurrency``: the
endpoint's cap on calls in flight (its ``default_params``), shared the same way.

    python -m tests.benchmark.providers.limited_caller --provider openai-compatible \\
        --base-url http://127.0.0.1:8765/v1 --endpoint ep-1 --model m --calls 100
"""

import argparse
import asyncio
import os


async def _calls(provider, model: str, calls: int, in_flight: int) -> tuple[int, int]:
    from benchmark.providers.base import ChatMessage, ChatRequest, ProviderError

    slots = asyncio.Semaphore(in_flight)
    outcomes: list[bool] = []

    async def one(number: int) -> None:
        request = ChatRequest(
            model=model,
            messages=(ChatMessage("user", f"call {os.getpid()} {number}"),),
            params={"max_tokens": 16},
        )
        async with slots:
            try:
                await provider.acomplete(request)
            except ProviderError:
                outcomes.append(False)
            else:
                outcomes.append(True)

    try:
        await asyncio.gather(*(one(n) for n in range(calls)))
    finally:
        await provider.aclose()
    return outcomes.count(True), outcomes.count(False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key-env", default="")
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--max-concurrency", type=int, default=None)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    import django

    django.setup()
    from benchmark.models import ModelEndpoint
    from benchmark.providers.factory import provider_for

    endpoint = ModelEndpoint(
        name=args.endpoint,
        display_name=args.endpoint,
        provider=args.provider,
        model_name=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        default_params=({"max_concurrency": args.max_concurrency} if args.max_concurrency else {}),
    )
    succeeded, failed = asyncio.run(
        _calls(provider_for(endpoint), args.model, args.calls, args.in_flight)
    )
    print(f"OK {succeeded} {failed}", flush=True)


if __name__ == "__main__":
    main()
