"""Repo-level pytest settings: the plugin's own tests drive pytest with pytester."""

pytest_plugins = ["pytester"]
