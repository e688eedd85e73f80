"""YAML → validated `Spec`, with every problem reported as a field path and a reason."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from astra_hetero.comm.measured import resolve_spec_tables
from astra_hetero.errors import SpecError
from astra_hetero.spec.devices import too_few_gpus
from astra_hetero.spec.parallel_checks import check_modern_parallelism
from astra_hetero.spec.schema import NcclTestsTable, Spec
from astra_hetero.spec.yamlfile import read_yaml

logger = logging.getLogger(__name__)


def _field_path(loc: tuple[Any, ...]) -> str:
    from astra_hetero.dynamics.events import EVENT_KINDS

    path = ""
    for i, part in enumerate(loc):
        if i >= 2 and loc[i - 2] == "dynamics" and part in EVENT_KINDS:
            continue  # the event kind that chose the model: the user wrote it as `event:`
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_union_label(str(part)):
            continue  # pydantic's union-branch labels are noise for a user
        elif not _PLAIN_KEY.fullmatch(str(part)):  # `tp:` or `tp ` as written: quoted, so it shows
            path += f"[{str(part)!r}]" if path else repr(str(part))
        else:
            path += f".{part}" if path else str(part)
    return path


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


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
    if error.get("type") in _MAPPING_TYPES:  # not pydantic's "... or instance of NodeGroupSpec"
        return f"expected a mapping of keys (key: value), got {_value_kind(error.get('input'))}"
    return message


# pydantic's error types for "a section (an object) was expected here"
_MAPPING_TYPES = frozenset({"model_type", "dict_type", "model_attributes_type"})


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
    starts from, since it chooses the parallel plan itself.

    A relative `calibration` path is resolved against the spec file's directory (`source`), else the
    working directory, and stored absolute; run directories store their own copy (see rundir). The
    spec's nccl-tests tables are resolved and read the same way.
    """
    if not isinstance(data, dict):
        raise SpecError("", f"the spec must be a mapping of sections, got {_kind(data)}")
    if "jobs" in data:
        raise SpecError(
            "jobs",
            "a spec of several jobs sharing a cluster is read by `run`, `build`, `generate`, `topology` "
            "and `plan` (search.job); this command takes a spec of one job",
        )
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise spec_error_from_validation(exc) from None
    except RecursionError:  # data built in code can nest without bound
        raise SpecError("", "the spec is nested too deeply") from None
    return resolve_files(spec, source)


SpecT = TypeVar("SpecT", bound=BaseModel)


def resolve_files(spec: SpecT, source: Path | None) -> SpecT:
    """The spec with its `calibration` path and nccl-tests tables resolved against the spec file's
    directory (`source`), else the working directory (any spec kind with `collectives`, `cluster` and
    `calibration` sections)."""
    base = source.parent if source is not None else Path.cwd()
    collectives = spec.collectives  # type: ignore[attr-defined]
    if collectives.nccl_tests:
        tables = resolve_spec_tables(collectives.nccl_tests, base, spec.cluster.group_names)  # type: ignore[attr-defined]
        collectives = collectives.model_copy(
            update={"nccl_tests": {k: [NcclTestsTable(**t) for t in v] for k, v in tables.items()}}
        )
        spec = spec.model_copy(update={"collectives": collectives})
    if spec.calibration is not None:  # type: ignore[attr-defined]
        calibration = Path(os.path.abspath(base / spec.calibration))  # type: ignore[attr-defined]
        if not calibration.is_file():
            raise SpecError("calibration", f"file not found: {calibration}")
        spec = spec.model_copy(update={"calibration": str(calibration)})
        spec._calibration_private = not _inside(calibration, base)
    return spec


def _inside(path: Path, directory: Path) -> bool:
    """Whether `path`, symlinks resolved, lies in `directory` or below it."""
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):
        return False


def _kind(data: Any) -> str:
    return "null (is the file empty?)" if data is None else type(data).__name__


def _value_kind(value: Any) -> str:
    """What a user wrote, in YAML's words: `got a list`, not pydantic's class names."""
    names = {bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


MAX_INCLUDE_DEPTH = 16


def _with_includes(data: Any, source: Path, chain: tuple[Path, ...]) -> Any:
    """`include: file.yaml` (or a list) pulls in top-level sections, e.g. a network_configs preset.

    Sections the including spec gives itself replace the included ones whole. `chain` holds the
    real paths of the files being read, so a cycle (a file including itself, two files including each
    other, a symlink pointing back) is reported instead of recursing. An included file is read as
    private: no error quotes it, since `include:` may name any file.
    """
    if not isinstance(data, dict) or "include" not in data:
        return data
    data = dict(data)
    includes = data.pop("include")
    names = includes if isinstance(includes, list) else [includes]
    merged: dict[str, Any] = {}
    for index, name in enumerate(names):
        field = f"include[{index}]" if isinstance(includes, list) else "include"
        if not isinstance(name, str) or not name.strip():
            raise SpecError(field, f"expected the path of a YAML file, got {_kind(name)}")
        path = _real_path(source.parent / name, field)
        if path in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(path) :], path))
            raise SpecError(field, f"include cycle: {cycle}")
        if len(chain) > MAX_INCLUDE_DEPTH:
            raise SpecError(field, f"includes nested more than {MAX_INCLUDE_DEPTH} files deep")
        included = read_yaml(path, field, "included file", private=True)
        if not isinstance(included, dict):
            raise SpecError(field, f"{path}: must hold a mapping of spec sections, not {_kind(included)}")
        if any(key not in SECTIONS for key in included):
            raise SpecError(
                field,
                f"{path}: top-level keys must be spec sections ({', '.join(sorted(SECTIONS))}); "
                f"{sum(key not in SECTIONS for key in included)} are not",
            )
        merged.update(_with_includes(included, path, (*chain, path)))
    merged.update(data)
    return merged


SECTIONS = frozenset(Spec.model_fields) | {"include"}


def _real_path(path: Path, field: str) -> Path:
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        raise SpecError(field, f"included file not found: {path}") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop (RuntimeError before Python 3.13)
        reason = getattr(exc, "strerror", None) or "a symlink loop"
        raise SpecError(field, f"{path}: cannot be resolved ({reason})") from None


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    spec = parse_spec(read_spec_data(path), source=path)
    logger.info("read %s: %r, %d GPUs", path, spec.name, spec.cluster.num_gpus)
    return spec


def read_spec_data(path: str | Path) -> Any:
    """A spec file's YAML with its includes merged in, not yet validated."""
    path = Path(path)
    data = read_yaml(path, "", "spec file")
    if not isinstance(data, dict):  # named here, where the file is known; parse_spec only has data
        raise SpecError("", f"{path}: the spec must be a mapping of sections, got {_kind(data)}")
    if "include" in data:
        data = _with_includes(data, path, (_real_path(path, ""),))
    return data


def check_consistency(spec: Spec) -> None:
    """Checks that span sections: products, divisibility, mapping names, partition lengths and sums."""
    from astra_hetero.dynamics.selection import check_dynamics

    check_dynamics(spec)
    par, model, cluster = spec.parallelism, spec.model, spec.cluster
    world = par.model_parallel_cell * par.pp * par.dp
    if world > cluster.num_gpus or (world != cluster.num_gpus and not spec.mapping.allow_idle_gpus):
        degrees, values = ("tp·cp·pp·dp", f"{par.tp}·{par.cp}·") if par.cp > 1 else ("tp·pp·dp", f"{par.tp}·")
        raise SpecError(
            "parallelism",
            f"{degrees} = {values}{par.pp}·{par.dp} = {world} but the cluster has {cluster.num_gpus} GPUs"
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
    _check_pipeline(spec)
    _check_overlap(spec)
    check_modern_parallelism(spec)
    _check_precision(spec)
    _check_mapping(spec)
    _check_partition(spec, num_micro_batches)


def _check_pipeline(spec: Spec) -> None:
    """Megatron-LM's rules for virtual pipeline stages (the interleaved 1F1B schedule)."""
    par, num_layers = spec.parallelism, spec.model.num_layers
    v = par.virtual_stages
    if v == 1:
        return
    if par.schedule != "1f1b":
        raise SpecError(
            "parallelism.virtual_stages",
            f"virtual_stages={v} needs schedule 1f1b (the interleaved 1F1B schedule); {par.schedule} "
            "has no interleaved form",
        )
    if par.pp < 2:
        raise SpecError("parallelism.virtual_stages", f"virtual_stages={v} needs pp ≥ 2, got pp={par.pp}")
    if par.pp * v > num_layers:
        raise SpecError(
            "parallelism.virtual_stages",
            f"pp·virtual_stages = {par.pp}·{v} = {par.pp * v} virtual stages exceed the model's "
            f"{num_layers} layers (every chunk holds at least one layer)",
        )


def _check_overlap(spec: Spec) -> None:
    par = spec.parallelism
    if par.overlap_param_gather and not par.distributed_optimizer:
        raise SpecError(
            "parallelism.overlap_param_gather",
            "needs distributed_optimizer: true (it overlaps the distributed optimizer's parameter "
            "all-gather with the forward pass)",
        )
    if par.overlap_param_gather and not par.overlap_grad_reduce:
        raise SpecError(
            "parallelism.overlap_param_gather",
            "needs overlap_grad_reduce: true (Megatron-LM requires both; the all-gathers use the "
            "gradient buckets)",
        )


def _check_precision(spec: Spec) -> None:
    """Every GPU type in the cluster has the compute format's matmul rate; the gradient width is
    given once (precision.grads and parallelism.grad_reduce_in_fp32 may not disagree)."""
    precision, par = spec.precision, spec.parallelism
    fmt = precision.compute
    for i, group in enumerate(spec.cluster.node_groups):
        if group.gpu.matmul_tflops(fmt) is None:
            raise SpecError(
                f"cluster.node_groups[{i}].gpu.{fmt}_tflops",
                f"precision.compute is {fmt} but {group.gpu.name} has no {fmt} matmul rate in the "
                f"catalog; give {fmt}_tflops or choose another precision.compute",
            )
    reduce_fp32 = par.grad_reduce_in_fp32
    if precision.grads is not None and reduce_fp32 is not None and (precision.grads == "fp32") != reduce_fp32:
        raise SpecError(
            "precision.grads",
            f"{precision.grads} contradicts parallelism.grad_reduce_in_fp32={par.grad_reduce_in_fp32}; "
            "give one of them",
        )


def _check_tp_within_nodes(spec: Spec) -> None:
    """Per node group that hosts cells: TP groups of `tp` consecutive GPUs stay inside one node, or
    inside one scale-up domain where the group has them (NVL72: TP may span the 18 trays)."""
    par, cluster = spec.parallelism, spec.cluster
    if par.allow_tp_across_nodes:
        return
    used = groups_in_use(spec)
    for i, (group, name) in enumerate(zip(cluster.node_groups, cluster.group_names, strict=True)):
        if name in used and group.scale_up_gpus % par.tp:
            if group.scale_up_domain is None:
                field, what = "gpus_per_node", f"gpus_per_node={group.gpus_per_node}"
                where = "one node"
            else:
                field, what = "scale_up_domain.gpus", f"scale_up_domain.gpus={group.scale_up_gpus}"
                where = "one scale-up domain"
            raise SpecError(
                f"cluster.node_groups[{i}].{field}",
                f"tp={par.tp} must divide {what} so that every TP group stays inside {where} (set "
                "parallelism.allow_tp_across_nodes to permit spanning)",
            )


def groups_in_use(spec: Spec) -> set[str]:
    """Node groups that host at least one pipeline cell."""
    mapping, par = spec.mapping, spec.parallelism
    named = {mapping.cell_group(s, r) for s in range(par.pp) for r in range(par.dp)}
    if None not in named:
        return {name for name in named if name is not None}
    # the default mapping takes the first tp·pp·dp GPUs in cluster order
    world, first_rank, used = par.model_parallel_cell * par.pp * par.dp, 0, set()
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
        need = cells.get(name, 0) * par.model_parallel_cell
        if need > group.num_gpus:
            raise SpecError(
                f"mapping.{field}",
                too_few_gpus(f"node group {name!r}", group.num_gpus, cells[name], par.model_parallel_cell),
            )
        if need < group.num_gpus and not mapping.allow_idle_gpus:
            raise SpecError(
                f"mapping.{field}",
                f"uses {need} of node group {name!r}'s {group.num_gpus} GPUs; every GPU must be in a "
                "cell unless mapping.allow_idle_gpus is set",
            )


def _check_partition(spec: Spec, num_micro_batches: int) -> None:
    _check_layers(spec)
    _check_micro_batches(spec, num_micro_batches)


def _check_layers(spec: Spec) -> None:
    """A list is pp stage totals, pp·v virtual stages in model order, or pp lists of v chunk sizes."""
    par, num_layers = spec.parallelism, spec.model.num_layers
    pp, v = par.pp, par.virtual_stages
    layers = spec.partition.layers
    if layers == "uniform" and v > 1 and num_layers % (pp * v):
        raise SpecError(
            "partition.layers",
            f"uniform needs the {num_layers} layers to divide evenly over pp·virtual_stages = {pp * v} "
            "virtual stages (as Megatron-LM's layers per virtual stage); give a list or use auto",
        )
    if not isinstance(layers, list):
        return
    if layers and isinstance(layers[0], list):
        if len(layers) != pp:
            raise SpecError("partition.layers", f"has {len(layers)} stage lists, expected pp={pp}")
        for stage, chunks in enumerate(layers):
            if len(chunks) != v:
                raise SpecError(
                    f"partition.layers[{stage}]",
                    f"has {len(chunks)} chunk sizes, expected virtual_stages={v}",
                )
        total = sum(sum(chunks) for chunks in layers)  # type: ignore[arg-type]
    else:
        expected = f"pp={pp}" if v == 1 else f"pp={pp} (per stage) or pp·virtual_stages={pp * v}"
        if len(layers) not in (pp, pp * v):
            raise SpecError("partition.layers", f"has {len(layers)} entries, expected {expected}")
        if len(layers) == pp and v > 1:
            for stage, count in enumerate(layers):
                if count < v:  # type: ignore[operator]
                    raise SpecError(
                        f"partition.layers[{stage}]",
                        f"{count} layers cannot fill the stage's {v} chunks (virtual_stages)",
                    )
        total = sum(layers)  # type: ignore[arg-type]
    if total != num_layers:
        raise SpecError("partition.layers", f"sums to {total} but the model has {num_layers} layers")


def _check_micro_batches(spec: Spec, num_micro_batches: int) -> None:
    par = spec.parallelism
    # Megatron-LM's interleaved schedule runs micro-batches in groups of pp (its default
    # microbatch_group_size_per_vp_stage) and needs each replica's count to be a multiple of pp.
    group = par.pp if par.virtual_stages > 1 else 1
    rule = f"the interleaved schedule (virtual_stages={par.virtual_stages}) needs a multiple of pp={par.pp}"
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
        for replica, count in enumerate(batches):
            if count % group:
                raise SpecError(f"partition.micro_batches[{replica}]", f"{count} micro-batches: {rule}")
    elif batches == "uniform" and num_micro_batches % spec.parallelism.dp:
        raise SpecError(
            "partition.micro_batches",
            f"uniform split of {num_micro_batches} micro-batches over dp={spec.parallelism.dp} is uneven; "
            "use auto or an explicit list",
        )
    elif batches == "uniform" and (num_micro_batches // par.dp) % group:
        raise SpecError(
            "partition.micro_batches",
            f"{num_micro_batches // par.dp} micro-batches per replica: {rule}",
        )
    elif batches == "auto" and (num_micro_batches % group or num_micro_batches // group < par.dp):
        raise SpecError(
            "partition.micro_batches",
            f"auto hands out groups of {group} micro-batches ({rule} per replica), but "
            f"{num_micro_batches} micro-batches do not make {par.dp} or more whole groups",
        )
