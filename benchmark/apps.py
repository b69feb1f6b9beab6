import importlib
import pkgutil

from django.apps import AppConfig


class BenchmarkConfig(AppConfig):
    name = "benchmark"
    verbose_name = "Benchmark corpus and runs"

    def ready(self) -> None:
        # Every module of benchmark.providers is imported, so that each adapter registers
        # itself (registry.py) before anything reads the provider choices: a new provider is
        # one new file, and there is no list to forget it in. Importing the whole package adds
        # nothing at start-up: the admin, set up before this app, already imports the
        # evaluation engine and with it the factory and both SDKs.
        package = importlib.import_module("benchmark.providers")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
