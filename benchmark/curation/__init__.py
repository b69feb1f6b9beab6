"""Curation: the three-agent loop (Planner, User Agent, cold-start Assistant) that writes new
dialogues for the corpus. See docs/curation.md."""
