"""The diagnosis's rules, one module per failure family; each registers its rules with ``registry.rule`` when
``registry.discover`` imports it. A new family is a new module here (with its test): nothing else lists it."""
