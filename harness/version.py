"""The harness version: copied into every record's environment and job id, and shown by ``kernelgate --version``.

A module of its own (not ``harness/__init__.py``) so that the modules that need it import a leaf: the package's
``__init__`` re-exports the API lazily, and importing it from below would close an import circle.
"""

__version__ = "0.1.0"
