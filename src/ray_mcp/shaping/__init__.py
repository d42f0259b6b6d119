"""Pure functions that shape what an agent sees: field choice, units, budgets, feasibility, text.

One module per area (the same names as ``tools/`` and ``answers/``), plus ``common.py`` for what every
answer shares. Nothing here talks to Ray or to MCP's transport; everything is unit-tested on plain data.
"""
