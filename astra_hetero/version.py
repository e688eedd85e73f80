"""The tool's version, in a module of its own so that the layers that record it (provenance, studies)
need not import the package's top, which reaches up to the Python API. Kept equal to pyproject.toml's."""

__version__ = "0.1.0"
