import importlib
import pkgutil

from django.apps import AppConfig


class BenchmarkConfig(AppConfig):
    name = "benchmark"
    verbose_name = "Benchmark corpus and runs"

    def ready(self) -> None:
        # Every module of benchmark.providers is imported, so that each adapter registers
        # itself (registry.py) before anything reads the provider choices: a new provider is
        # one new file, and there is no list to forget it in. The adapters import their
        # vendor's SDK only when they build a client: both SDKs cost about 2 s of CPU, which
        # every process (web server, worker, migrate) would otherwise pay at start-up.
        package = importlib.import_module("benchmark.providers")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
