"""What images add to a provider call on our side: building the vendor's request (base64 of every
image) and the rate limiter's token estimate (Pillow reads each image's header), per vendor, for
requests carrying three ~200 KB JPEGs; then the same requests sent through the real SDKs to the
fake vendor server, which decodes and checks every image as the vendors do.

    .venv/bin/python bench/image_requests.py [--requests 200] [--images 3]

Prints a table, then ``RESULT prepare_ms_per_request_openai= prepare_ms_per_request_anthropic=
estimate_ms_per_image= sent_ms_per_request= peak_rss_mb= probe_hot_ms=``. Needs no database.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")

import django  # noqa: E402

django.setup()

from PIL import Image  # noqa: E402

from bench.machine import speed_probe  # noqa: E402
from benchmark.providers.anthropic_messages import AnthropicMessagesProvider  # noqa: E402
from benchmark.providers.base import ChatMessage, ChatRequest, ImagePart  # noqa: E402
from benchmark.providers.images import openai_image_tokens  # noqa: E402
from benchmark.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from tests.fakes.vendor_server import FakeVendorServer  # noqa: E402


def _jpeg(seed: int, target_bytes: int = 200_000) -> ImagePart:
    """A noisy 1024×768 JPEG of about ``target_bytes`` (noise does not compress)."""
    rng = random.Random(seed)
    quality = 60
    noise = bytes(rng.getrandbits(8) for _ in range(512 * 384 * 3))
    image = Image.frombytes("RGB", (512, 384), noise).resize((1024, 768))
    while True:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        data = buffer.getvalue()
        if len(data) <= target_bytes or quality <= 10:
            break
        quality -= 5
    return ImagePart("image/jpeg", data, hashlib.sha256(data).hexdigest())


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--images", type=int, default=3)
    args = parser.parse_args()

    probe = speed_probe()
    pool = [_jpeg(seed) for seed in range(10)]
    requests = [
        ChatRequest(
            model="vision-model",
            messages=(
                ChatMessage("system", "Be helpful."),
                ChatMessage(
                    "user",
                    f"Request {n}: what is behind the hand?",
                    images=tuple(pool[(n + i) % len(pool)] for i in range(args.images)),
                ),
            ),
            params={"max_tokens": 256},
        )
        for n in range(args.requests)
    ]
    image_kb = sum(len(p.data) for p in pool) / len(pool) / 1024
    rows = []
    with FakeVendorServer() as server:
        providers = {
            "openai": OpenAIChatProvider(base_url=server.openai_base_url, api_key="sk-bench-key"),
            "anthropic": AnthropicMessagesProvider(
                base_url=server.anthropic_base_url, api_key="sk-ant-bench-key"
            ),
        }
        prepare_ms = {}
        for vendor, provider in providers.items():
            started = time.perf_counter()
            for request in requests:
                provider._prepare(request)
            prepare_ms[vendor] = (time.perf_counter() - started) * 1000 / len(requests)
            rows.append((f"{vendor}: build request + estimate", f"{prepare_ms[vendor]:.2f} ms"))

        started = time.perf_counter()
        for _ in range(20):
            for image in pool:
                openai_image_tokens(image)
        estimate_ms = (time.perf_counter() - started) * 1000 / (20 * len(pool))
        rows.append(("token estimate, one image (header read)", f"{estimate_ms:.3f} ms"))

        sent = requests[: max(1, args.requests // 4)]
        started = time.perf_counter()
        for request in sent:
            providers["openai"].complete(request)
        sent_ms = (time.perf_counter() - started) * 1000 / len(sent)
        rows.append(
            (
                f"openai SDK → fake server, {len(sent)} calls (fake decodes every image)",
                f"{sent_ms:.1f} ms",
            )
        )
        assert all(entry.status == 200 for entry in server.requests())

    print(f"{args.requests} requests × {args.images} JPEG images of ~{image_kb:.0f} KB (1024×768)")
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"  {label:<{width}}  {value:>10}")
    print(f"  {'peak RSS':<{width}}  {_peak_rss_mb():>7.0f} MB")
    print(
        f"RESULT prepare_ms_per_request_openai={prepare_ms['openai']:.2f} "
        f"prepare_ms_per_request_anthropic={prepare_ms['anthropic']:.2f} "
        f"estimate_ms_per_image={estimate_ms:.3f} sent_ms_per_request={sent_ms:.1f} "
        f"peak_rss_mb={_peak_rss_mb():.0f} probe_hot_ms={probe['hot_ms']:.1f}"
    )


if __name__ == "__main__":
    main()
