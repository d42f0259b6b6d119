"""Evaluation scripts: they score ray-mcp's answers (they are not tests, and pytest never collects them)."""
