"""Real local stand-ins for outside services (vendor HTTP APIs), so tests drive the real SDKs."""
