"""Chat-completion providers behind one small interface (see base.py).

Adapters register themselves in registry.py: ``openai`` and ``openai-compatible``
(openai_chat.py), ``anthropic`` (anthropic_messages.py) and ``replay`` (replay.py; offline). The
SDK-backed ones share sdk.py. ``provider_for(endpoint)`` (factory.py) builds the right one for a
ModelEndpoint. docs/pipeline.md says how to add a provider.
"""
