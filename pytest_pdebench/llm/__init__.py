"""Solver generation by an LLM: model registry, client, prompts' transport, cache."""
