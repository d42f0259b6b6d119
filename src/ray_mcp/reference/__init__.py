"""The Ray reference: the docs pages (pages.py) and the live API reference of the installed Ray (api.py,
source.py), read from its sources, never imported."""
