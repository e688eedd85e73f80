"""YAML → validated `Spec`, with every problem reported as a field path and a reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from astra_hetero.errors import SpecError
from astra_hetero.spec.schema import Spec


def _field_path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_union_label(str(part)):
            continue  # pydantic's union-branch labels are noise for a user
        else:
            path += f".{part}" if path else str(part)
    return path


def _is_union_label(part: str) -> bool:
    return (
        "[" in part
        or part.startswith(("function-", "tagged-union", "constrained-"))
        or part in {"str", "int", "float", "bool"}
    )


def _reason(error: dict[str, Any]) -> str:
    message = str(error.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if error.get("type") == "extra_forbidden":
        return "unknown field (check the spelling; unknown keys are rejected)"
    if error.get("type") == "missing":
        return "required field is missing"
    return message


def spec_error_from_validation(exc: ValidationError) -> SpecError:
    """One error that names each offending field; deduplicated across union branches."""
    seen: dict[str, str] = {}
    for error in exc.errors():
        path = _field_path(tuple(error.get("loc", ())))
        seen.setdefault(path, _reason(error))
    items = list(seen.items())
    first_path, first_reason = items[0]
    if len(items) == 1:
        return SpecError(first_path, first_reason)
    details = "; ".join(f"{p or '<spec>'}: {r}" for p, r in items[1:])
    return SpecError(first_path, f"{first_reason} (also: {details})")


def parse_spec(data: Any, source: Path | None = None) -> Spec:
    """Validate a spec given as plain data (e.g. built in code or read from YAML)."""
    spec = validate_sections(data, source)
    check_consistency(spec)
    return spec


def validate_sections(data: Any, source: Path | None = None) -> Spec:
    """Every section on its own (the schema), without the checks that span sections: what the planner
    starts from, since it chooses the parallel plan itself. The calibration path is resolved."""
    if not isinstance(data, dict):
        raise SpecError("", f"the spec must be a mapping of sections, got {type(data).__name__}")
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_validation(exc) from None
    if spec.calibration is not None:
        base = source.parent if source is not None else Path.cwd()
        calibration = (base / spec.calibration).resolve()
        if not calibration.is_file():
            raise SpecError("calibration", f"file not found: {calibration}")
        spec = spec.model_copy(update={"calibration": str(calibration)})
    return spec


def _read_yaml(path: Path, field: str) -> Any:
    if not path.is_file():
        raise SpecError(field, f"file not found: {path}")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(field, f"{path} is not valid YAML: {exc}") from None


def _with_includes(data: Any, source: Path) -> Any:
    """`include: file.yaml` (or a list) pulls in top-level sections, e.g. a network_configs preset.

    Sections the including spec gives itself replace the included ones whole.
    """
    if not isinstance(data, dict) or "include" not in data:
        return data
    includes = data.pop("include")
    merged: dict[str, Any] = {}
    for index, name in enumerate(includes if isinstance(includes, list) else [includes]):
        field = f"include[{index}]" if isinstance(includes, list) else "include"
        path = (source.parent / str(name)).resolve()
        included = _with_includes(_read_yaml(path, field), path)
        if not isinstance(included, dict):
            raise SpecError(field, f"{name} must hold a mapping of spec sections")
        merged.update(included)
    merged.update(data)
    return merged


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    return parse_spec(read_spec_data(path), source=path)


def read_spec_data(path: str | Path) -> Any:
    """A spec file's YAML with its includes merged in, not yet validated."""
    path = Path(path)
    return _with_includes(_read_yaml(path, ""), path)


def check_consistency(spec: Spec) -> None:
    """Checks that span sections: products, divisibility, mapping names, partition lengths and sums."""
    par, model, cluster = spec.parallelism, spec.model, spec.cluster
    world = par.tp * par.pp * par.dp
    if world > cluster.num_gpus or (world != cluster.num_gpus and not spec.mapping.allow_idle_gpus):
        raise SpecError(
            "parallelism",
            f"tp·pp·dp = {par.tp}·{par.pp}·{par.dp} = {world} but the cluster has {cluster.num_gpus} GPUs"
            + ("" if world > cluster.num_gpus else " (set mapping.allow_idle_gpus to leave GPUs idle)"),
        )
    for field, value in (
        ("num_heads", model.num_heads),
        ("num_kv_heads", model.num_kv_heads),
        ("ffn_size", model.ffn_size),
    ):
        if value % par.tp:
            raise SpecError("parallelism.tp", f"tp={par.tp} does not divide model.{field}={value}")
    if par.sequence_parallel and par.tp == 1:
        raise SpecError("parallelism.sequence_parallel", "needs tp > 1")
    if model.num_layers < par.pp:
        raise SpecError("parallelism.pp", f"pp={par.pp} exceeds the model's {model.num_layers} layers")
    if par.global_batch_size % par.micro_batch_size:
        raise SpecError(
            "parallelism.global_batch_size",
            f"{par.global_batch_size} is not a multiple of micro_batch_size {par.micro_batch_size}",
        )
    num_micro_batches = par.global_batch_size // par.micro_batch_size
    if num_micro_batches < par.dp:
        raise SpecError(
            "parallelism.global_batch_size",
            f"{num_micro_batches} micro-batches cannot feed dp={par.dp} replicas (each needs at least one)",
        )
    _check_mapping(spec)
    _check_partition(spec, num_micro_batches)


def _check_tp_within_nodes(spec: Spec) -> None:
    """Per node group that hosts cells: TP groups of `tp` consecutive GPUs stay inside one node."""
    par, cluster = spec.parallelism, spec.cluster
    if par.allow_tp_across_nodes:
        return
    used = groups_in_use(spec)
    for i, (group, name) in enumerate(zip(cluster.node_groups, cluster.group_names, strict=True)):
        if name in used and group.gpus_per_node % par.tp:
            raise SpecError(
                f"cluster.node_groups[{i}].gpus_per_node",
                f"tp={par.tp} must divide gpus_per_node={group.gpus_per_node} so that every TP group "
                "stays inside one node (set parallelism.allow_tp_across_nodes to permit spanning)",
            )


def groups_in_use(spec: Spec) -> set[str]:
    """Node groups that host at least one pipeline cell."""
    mapping, par = spec.mapping, spec.parallelism
    named = {mapping.cell_group(s, r) for s in range(par.pp) for r in range(par.dp)}
    if None not in named:
        return {name for name in named if name is not None}
    # the default mapping takes the first tp·pp·dp GPUs in cluster order
    world, first_rank, used = par.tp * par.pp * par.dp, 0, set()
    for group, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True):
        if first_rank < world:
            used.add(name)
        first_rank += group.num_gpus
    return used


def _check_mapping(spec: Spec) -> None:
    mapping, par = spec.mapping, spec.parallelism
    names = spec.cluster.group_names
    if mapping.grid is not None:
        if len(mapping.grid) != par.pp:
            raise SpecError("mapping.grid", f"has {len(mapping.grid)} rows (stages), expected pp={par.pp}")
        for stage, row in enumerate(mapping.grid):
            if len(row) != par.dp:
                raise SpecError(
                    f"mapping.grid[{stage}]", f"has {len(row)} entries (replicas), expected dp={par.dp}"
                )
    for field, entries, expected in (
        ("stages", mapping.stages, par.pp),
        ("replicas", mapping.replicas, par.dp),
    ):
        if entries is not None and len(entries) != expected:
            raise SpecError(f"mapping.{field}", f"has {len(entries)} entries, expected {expected}")
    for path, name in _named_cells(spec):
        if name not in names:
            raise SpecError(path, f"unknown node group {name!r}; known: {', '.join(names)}")
    _check_tp_within_nodes(spec)
    _check_group_capacity(spec)


def _named_cells(spec: Spec) -> list[tuple[str, str]]:
    """(field path, node group) for every name the mapping gives."""
    mapping = spec.mapping
    if mapping.grid is not None:
        return [
            (f"mapping.grid[{s}][{r}]", name)
            for s, row in enumerate(mapping.grid)
            for r, name in enumerate(row)
        ]
    for field in ("stages", "replicas"):
        entries = getattr(mapping, field)
        if entries is not None:
            return [(f"mapping.{field}[{i}]", name) for i, name in enumerate(entries)]
    return []


def _check_group_capacity(spec: Spec) -> None:
    """Every node group holds the cells mapped to it (tp GPUs each); without allow_idle_gpus, every GPU
    of the cluster is in some cell."""
    mapping, par = spec.mapping, spec.parallelism
    if not _named_cells(spec):
        return
    field = next(f for f in ("grid", "stages", "replicas") if getattr(mapping, f) is not None)
    cells: dict[str, int] = {}
    for s in range(par.pp):
        for r in range(par.dp):
            name = mapping.cell_group(s, r)
            if name is not None:
                cells[name] = cells.get(name, 0) + 1
    for group, name in zip(spec.cluster.node_groups, spec.cluster.group_names, strict=True):
        need = cells.get(name, 0) * par.tp
        if need > group.num_gpus:
            raise SpecError(
                f"mapping.{field}",
                f"maps {cells[name]} cells of tp={par.tp} GPUs ({need} GPUs) to node group {name!r}, "
                f"which has {group.num_gpus}",
            )
        if need < group.num_gpus and not mapping.allow_idle_gpus:
            raise SpecError(
                f"mapping.{field}",
                f"uses {need} of node group {name!r}'s {group.num_gpus} GPUs; every GPU must be in a "
                "cell unless mapping.allow_idle_gpus is set",
            )


def _check_partition(spec: Spec, num_micro_batches: int) -> None:
    layers = spec.partition.layers
    if isinstance(layers, list):
        if len(layers) != spec.parallelism.pp:
            raise SpecError(
                "partition.layers", f"has {len(layers)} entries, expected pp={spec.parallelism.pp}"
            )
        if sum(layers) != spec.model.num_layers:
            raise SpecError(
                "partition.layers", f"sums to {sum(layers)} but the model has {spec.model.num_layers} layers"
            )
    batches = spec.partition.micro_batches
    if isinstance(batches, list):
        if len(batches) != spec.parallelism.dp:
            raise SpecError(
                "partition.micro_batches", f"has {len(batches)} entries, expected dp={spec.parallelism.dp}"
            )
        if sum(batches) != num_micro_batches:
            raise SpecError(
                "partition.micro_batches",
                f"sums to {sum(batches)} but global_batch_size/micro_batch_size = {num_micro_batches}",
            )
    elif batches == "uniform" and num_micro_batches % spec.parallelism.dp:
        raise SpecError(
            "partition.micro_batches",
            f"uniform split of {num_micro_batches} micro-batches over dp={spec.parallelism.dp} is uneven; "
            "use auto or an explicit list",
        )
