"""Experiment specs: validated schema, hardware/model catalog, YAML loading."""

from astra_hetero.spec.load import load_spec, parse_spec
from astra_hetero.spec.schema import Spec

__all__ = ["Spec", "load_spec", "parse_spec"]
