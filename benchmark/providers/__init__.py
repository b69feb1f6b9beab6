"""Chat-completion providers behind one small interface (see base.py).

Adapters: ``openai`` (Chat Completions; any OpenAI-compatible server by base URL), ``anthropic``
(Messages) and ``replay`` (recorded replies; offline). ``provider_for(endpoint)`` builds the
right one for a ModelEndpoint.
"""
