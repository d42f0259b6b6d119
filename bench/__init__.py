"""Benchmarks of ray-mcp, measured side by side in one run (this machine is noisy)."""
