"""The house rule on bad input, as a checker: mutate a valid input, run the CLI in-process, and judge
what came back.

A command given bad input must end with exit code 2 and one line on stderr naming the field or file
and the reason, and leave no output behind; a command that succeeds must not have written a number it
cannot stand behind (NaN, infinity, a negative time). `judge` returns the broken rules, so that the
test module (hypothesis, in CI) and `benchmarks/fuzz_inputs.py` (many more cases, a summary) share
one definition of "broken".
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_hetero.cli.main import main

# Values a user (or a careless script) can write where a number, name, list or section belongs.
ODD_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    "",
    "x",
    "nan",
    "inf",
    "-inf",
    "1e400",
    -1,
    0,
    -0.5,
    1.5,
    10**30,
    2**63,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e-300,
    [],
    {},
    [1],
    {"unknown": 1},
    "x" * 300,
)


@dataclass(frozen=True)
class Outcome:
    """What one CLI call did: its exit code, stderr, and what its outputs looked like afterwards."""

    code: int
    stderr: str
    changed: tuple[str, ...]  # output paths created or modified by a failing call
    bad_numbers: tuple[str, ...]  # JSON paths of non-finite or negative numbers a successful call wrote


def snapshot(paths: list[Path]) -> dict[str, str]:
    """Every file under `paths` with a hash of its content (directories as ''), to see what a call
    changed."""
    seen: dict[str, str] = {}
    for root in paths:
        if root.is_file():
            seen[str(root)] = hashlib.sha1(root.read_bytes()).hexdigest()
        elif root.is_dir():
            seen[str(root)] = ""
            for path in sorted(root.rglob("*")):
                seen[str(path)] = hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() else ""
    return seen


def invoke(argv: list[str], outputs: list[Path], results: list[Path] = ()) -> Outcome:  # type: ignore[assignment]
    """Run `astra-hetero argv` in this process. `outputs`: what the call may write (and must leave as
    it was on failure); `results`: result/summary JSON files whose numbers must be finite on success."""
    before = snapshot(outputs)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    after = snapshot(outputs)
    changed = ()
    if code != 0:
        changed = tuple(sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p)))
    bad: tuple[str, ...] = ()
    if code == 0:
        bad = tuple(b for path in results if path.is_file() for b in bad_numbers(_load_json(path), path.name))
    return Outcome(code, err.getvalue(), changed, bad)


def _load_json(path: Path) -> Any:
    return json.loads(path.read_text(), parse_constant=lambda name: float(name))


# Quantities that may be negative: differences, errors, slopes, offsets.
_SIGNED = ("error", "delta", "diff", "change", "slope", "offset", "gain", "vs_", "pct_of", "speedup")


def bad_numbers(data: Any, where: str = "") -> Iterator[str]:
    """JSON paths of NaN/infinite numbers, and of negative ones whose name does not say they are
    signed."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from bad_numbers(value, f"{where}.{key}")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from bad_numbers(value, f"{where}[{i}]")
    elif isinstance(data, float | int) and not isinstance(data, bool):
        if not math.isfinite(data):
            yield f"{where}={data}"
        elif data < 0 and not any(s in where.lower() for s in _SIGNED):
            yield f"{where}={data}"


def judge(outcome: Outcome, names: tuple[str, ...], point_failures: bool = False) -> list[str]:
    """The house rules `outcome` breaks (empty: none). `names`: words of which the error must contain
    at least one (the mutated field's keys, the file's name). `point_failures`: a sweep or study, where
    a point whose spec turns out invalid fails alone, in the table, and the command exits 1 (by design:
    the other points still run)."""
    broken = []
    err = outcome.stderr.strip()
    if point_failures and outcome.code == 1 and "unexpected" not in err:
        return []
    if outcome.code not in (0, 2):
        broken.append(f"exit-{outcome.code}")
    if "Traceback" in err:
        broken.append("traceback")
    if outcome.code == 2:
        if err.count("\n") > 0 and not err.startswith("usage:"):
            broken.append("multi-line")
        if names and not _names_something(err, names):
            broken.append("unnamed")
    if outcome.code != 0 and outcome.changed:
        broken.append("leftover")
    if outcome.bad_numbers:
        broken.append("bad-number")
    return broken


# "error: cluster.node_groups[0].nic: ..." or "error: /path/file.json: ...": a field path or a file
_NAMED = re.compile(r"^error: [^\s:]*[\w\]/][^\s:]*(:\d+)?: \S")


def _names_something(err: str, names: tuple[str, ...]) -> bool:
    """Whether the error names one of `names` or starts with a field path or a file path (a mutation
    can rightly be reported at another field, e.g. tp at the product tp·pp·dp)."""
    return any(name.lower() in err.lower() for name in names if name) or bool(_NAMED.match(err))


# --- mutations of plain data (a parsed YAML/JSON document) ------------------------------------------


def paths_of(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key/index path in `data`, the root included."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found += paths_of(value, (*prefix, i))
    return found


def get_at(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


@dataclass(frozen=True)
class Mutation:
    """One change to a document: what it did (for the report) and the names an error should give."""

    what: str
    names: tuple[str, ...]


def mutate(data: Any, rng: random.Random) -> tuple[Any, Mutation]:
    """A copy of `data` with one random change: a value replaced by an odd one, scaled, a key removed
    or added, a list emptied or grown."""
    data = copy.deepcopy(data)
    path = rng.choice(paths_of(data))
    names = tuple(str(p) for p in path if isinstance(p, str))
    if not path:
        value = rng.choice([None, [], "text", 3, [data]])
        return value, Mutation(f"<root> = {value!r:.40}", ())
    parent = get_at(data, path[:-1])
    key = path[-1]
    old = parent[key]
    op = rng.choice(["replace", "replace", "replace", "scale", "delete", "add", "list", "nearby", "nearby"])
    if op == "nearby" and isinstance(old, int | float) and not isinstance(old, bool):
        # a plausible value, so that more mutated specs stay valid and reach the engine
        if isinstance(old, int):
            new = rng.choice([1, 2, 3, 4, 8, 16, old + 1, max(old - 1, 0), old * 2])
        else:
            new = old * rng.choice([0.5, 2.0, 0.1, 10.0, 0.99])
        parent[key] = new
        return data, Mutation(f"{_dotted(path)}: {old!r} -> {new!r}", names)
    if op == "scale" and isinstance(old, int | float) and not isinstance(old, bool):
        factor = rng.choice([0, -1, 2, 3, 0.5, 1000, 1e9, 1e-9])
        new = type(old)(old * factor) if isinstance(old, int) and float(factor).is_integer() else old * factor
        parent[key] = new
        return data, Mutation(f"{_dotted(path)}: {old!r} -> {new!r}", names)
    if op == "delete":
        del parent[key]
        return data, Mutation(f"{_dotted(path)}: removed", names + tuple(str(k) for k in path[:-1][-1:]))
    if op == "add" and isinstance(old, dict):
        old[rng.choice(["unknown_key", "Name", "tp ", "dp"])] = rng.choice([1, "x", None])
        return data, Mutation(f"{_dotted(path)}: a key added", names)
    if op == "list" and isinstance(old, list):
        new = rng.choice([[], old + old, old[:1], old[::-1]])
        parent[key] = new
        return data, Mutation(f"{_dotted(path)}: list of {len(old)} -> {len(new)}", names)
    new = rng.choice(ODD_VALUES)
    parent[key] = copy.deepcopy(new)
    return data, Mutation(f"{_dotted(path)}: {old!r:.30} -> {new!r:.30}", names)


def _dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<root>"


# --- mutations of bytes (a file as it lies on disk) -------------------------------------------------


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A copy of `data` truncated, with bytes flipped or inserted, emptied, or made invalid UTF-8."""
    op = rng.choice(["truncate", "truncate", "flip", "insert", "empty", "garbage"])
    if op == "truncate" and data:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncated at byte {cut} of {len(data)}"
    if op == "flip" and data:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out), "bytes flipped"
    if op == "insert":
        at = rng.randrange(len(data) + 1)
        junk = rng.choice([b"\xff\xfe", b"\x00", b"{", b"]]]", b":\n  - ", b"\xc3"])
        return data[:at] + junk + data[at:], f"{junk!r} inserted at byte {at}"
    if op == "empty":
        return b"", "emptied"
    return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))), "random bytes"


# --- targets: one input edge of the CLI each ---------------------------------------------------------

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parents[1]


@dataclass(frozen=True)
class Case:
    """One CLI call on a mutated input, with what judging it needs."""

    argv: list[str]
    outputs: list[Path]
    results: list[Path]
    names: tuple[str, ...]
    what: str
    point_failures: bool = False  # a sweep or study (see `judge`)


def small_seeds() -> dict[str, dict[str, Any]]:
    """Valid specs that build and run in a fraction of a second, each with a feature switched on."""
    from tests.conftest import node_group
    from tests.test_pipeline import small_spec

    base = small_spec()
    scope = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
    mixed = small_spec()
    mixed["cluster"] = {
        "node_groups": [
            node_group("h100", "h100-sxm", count=1, nic=400),
            node_group("a100", "a100-80", count=1, fabric="nvlink3", nic={"gbps": 200}),
        ]
    }
    mixed["mapping"] = {"stages": ["h100", "a100"]}
    mixed["partition"] = {"layers": [3, 1], "micro_batches": "uniform"}
    moe = small_spec()
    moe["model"] = {**moe["model"], "moe": {"num_experts": 4, "top_k": 2, "expert_ffn_size": 1024}}
    moe["parallelism"] = {"tp": 1, "pp": 2, "dp": 4, "ep": 2, "global_batch_size": 8}
    cp = small_spec()
    cp["parallelism"] = {"tp": 2, "cp": 2, "pp": 1, "dp": 2, "global_batch_size": 4}
    dynamics = {
        **small_spec(),
        "iterations": 2,
        "dynamics": [
            {
                "event": "link_rate",
                "node_group": "h100",
                "node": 0,
                "kind": "nic",
                "factor": 0.5,
                "start_ms": 1,
                "end_ms": 3,
            },
            {
                "event": "device_slowdown",
                "node_group": "h100",
                "node": 1,
                "factor": 0.7,
                "start_ms": 0,
                "end_ms": 2,
            },
            {"event": "jitter", "sigma": 0.05, "seed": 7},
        ],
    }
    precision = {**small_spec(), "precision": {"compute": "fp8"}, "compute": {"framework": "fsdp"}}
    return {
        "small": base,
        "mixed": {**mixed, "scope": scope},
        "moe": moe,
        "cp": cp,
        "dynamics": dynamics,
        "precision": precision,
    }


def example_seeds() -> dict[str, dict[str, Any]]:
    """The shipped example specs (with their includes made absolute), for the standalone fuzzer."""
    import yaml

    seeds = {}
    for path in sorted((REPO / "examples").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if not isinstance(data, dict) or "model" not in data and "jobs" not in data:
            continue
        if isinstance(data.get("include"), str):
            data["include"] = str((path.parent / data["include"]).resolve())
        seeds[path.stem] = data
    return seeds


class Bases:
    """Valid inputs the targets start from, made once under `root` and copied for each case."""

    def __init__(self, root: Path, seeds: dict[str, dict[str, Any]] | None = None) -> None:
        self.root = root
        self.seeds = seeds if seeds is not None else small_seeds()
        self._made: dict[str, Path] = {}

    def _once(self, name: str, make: Any) -> Path:
        if name not in self._made:
            path = self.root / "bases" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.redirect_stdout(io.StringIO()):  # the summary of a run: not the fuzzer's
                make(path)
            self._made[name] = path
        return self._made[name]

    def run_dir(self, finished: bool, dcqcn: bool = False) -> Path:
        """The small spec built (or also run) into a run directory; `dcqcn`: under the DCQCN link
        model, which reads ns3/config.txt."""
        import yaml

        def make(path: Path) -> None:
            data = copy.deepcopy(self.seeds["small"])
            if dcqcn:
                data["network"]["link_model"] = "dcqcn"
                data["scope"] = {"layers_per_stage": 1, "micro_batches_per_replica": 1}
            spec = path.parent / f"{path.name}.yaml"
            spec.write_text(yaml.safe_dump(data))
            command = "run" if finished else "build"
            assert main([command, str(spec), "-o", str(path), "--quiet"]) == 0

        name = ("finished" if finished else "built") + ("-dcqcn" if dcqcn else "")
        return self._once(name, make)

    def study(self) -> Path:
        """ASTRA-sim's 4-NPU all-reduce traces with a ring network and a system file."""

        def make(path: Path) -> None:
            import shutil

            from tests.importer.studies import SYSTEM, ring_network

            shutil.copytree(DATA / "astrasim_studies" / "all_reduce_4npus_1MB", path)
            (path / "system.json").write_text(json.dumps(SYSTEM))
            (path / "network.yml").write_text(ring_network(4))
            (path / "groups.json").write_text(json.dumps({"1": [0, 1, 2, 3]}))
            (path / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))

        return self._once("study", make)

    def imported(self) -> Path:
        def make(path: Path) -> None:
            study = self.study()
            assert main(["import", "-o", str(path), *import_options(study)]) == 0

        return self._once("imported", make)


def import_options(study: Path) -> list[str]:
    return [
        "--workload-configuration", str(study / "all_reduce"),
        "--system-configuration", str(study / "system.json"),
        "--network-configuration", str(study / "network.yml"),
        "--remote-memory-configuration", str(study / "memory.json"),
        "--comm-group-configuration", str(study / "groups.json"),
    ]  # fmt: skip


def _write_yaml(path: Path, data: Any) -> None:
    import yaml

    path.write_text(yaml.safe_dump(data, allow_unicode=True))


def _copy(source: Path, work: Path, name: str) -> Path:
    import shutil

    target = work / name
    shutil.copytree(source, target, symlinks=True)
    return target


def spec_case(command: str, bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec with one field mutated (or two), given to `command` (build, run, topology)."""
    seed = rng.choice(sorted(bases.seeds))
    data, mutation = mutate(bases.seeds[seed], rng)
    if rng.random() < 0.25 and isinstance(data, dict):
        data, second = mutate(data, rng)
        mutation = Mutation(f"{mutation.what}; {second.what}", mutation.names + second.names)
    spec = work / "spec.yaml"
    _write_yaml(spec, data)
    out = work / "out"
    argv = [command, str(spec), "-o", str(out)]
    if command != "plan" and command != "topology":
        argv.append("--quiet")
    names = (*mutation.names, "spec.yaml")
    return Case(argv, [out], [out / "result.json"], names, f"{seed}: {mutation.what}")


def mutate_yaml_text(text: str, rng: random.Random) -> tuple[str, str]:
    """YAML that parses into something else than the writer meant: a duplicated key, an alias bomb,
    deep nesting, an anchor/alias standing for a value, a tab, a byte-order mark, a second document."""
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    op = rng.choice(["duplicate", "bomb", "deep", "alias", "tab", "bom", "documents", "merge"])
    if op == "duplicate":
        lines.insert(i, lines[i])
        return "\n".join(lines) + "\n", f"line {i + 1} repeated"
    if op == "bomb":
        bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        bomb += [
            f"a{k}: &a{k} [*a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}, *a{k - 1}]"
            for k in range(1, 9)
        ]
        return "\n".join(bomb + lines) + "\n", "an alias bomb on top"
    if op == "deep":
        return text + "deep: " + "[" * 5000 + "]" * 5000 + "\n", "nested 5000 deep"
    if op == "alias":
        key, sep, value = lines[i].partition(": ")
        if sep and value:
            lines[i] = f"{key}: &v {value}"
            lines.append(f"{key.strip().lstrip('- ')}_copy: *v")
            return "\n".join(lines) + "\n", f"line {i + 1} anchored, then aliased under a new key"
        return text + "x: *undefined\n", "an undefined alias"
    if op == "tab":
        lines[i] = "\t" + lines[i]
        return "\n".join(lines) + "\n", f"a tab before line {i + 1}"
    if op == "bom":
        return "\ufeff" + text, "a byte-order mark"
    if op == "documents":
        return text + "---\n" + text, "two documents"
    return "base: &b {x: 1}\n" + text + "other:\n  <<: *b\n", "a merge key"


def spec_bytes_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec file damaged on disk (truncated, garbage bytes, not UTF-8, YAML that means something
    else), given to `build`."""
    import yaml

    seed = rng.choice(sorted(bases.seeds))
    text = yaml.safe_dump(bases.seeds[seed]).encode()
    if rng.random() < 0.5:
        changed, what = mutate_yaml_text(text.decode(), rng)
        damaged = changed.encode()
    else:
        damaged, what = mutate_bytes(text, rng)
    spec = work / "spec.yaml"
    spec.write_bytes(damaged)
    out = work / "out"
    return Case(["build", str(spec), "-o", str(out), "--quiet"], [out], [], ("spec.yaml",), f"{seed}: {what}")


def _mutate_file(path: Path, rng: random.Random) -> str:
    """Mutate one file in place: JSON/YAML by value when it parses, else (and sometimes anyway) by
    bytes; or remove it, or give a trace a sibling for a rank that does not exist."""
    import shutil

    import yaml

    if rng.random() < 0.1:
        path.unlink()
        return "removed"
    if path.suffix == ".et" and rng.random() < 0.1:
        stem, _, _ = path.stem.rpartition(".")
        extra = path.with_name(f"{stem}.{rng.choice([4, 9, 1000])}.et")
        shutil.copy(path, extra)
        return f"copied to {extra.name}"
    raw = path.read_bytes()
    if path.suffix in (".json", ".yml", ".yaml") and rng.random() < 0.7:
        try:
            data = json.loads(raw) if path.suffix == ".json" else yaml.safe_load(raw)
        except ValueError:
            data = None
        if data is not None:
            changed, mutation = mutate(data, rng)
            if path.suffix == ".json":
                path.write_text(json.dumps(changed))
            else:
                _write_yaml(path, changed)
            return mutation.what
    if path.suffix == ".txt" and rng.random() < 0.5:  # ns-3 config: KEY VALUE lines
        lines = raw.decode(errors="replace").splitlines()
        if lines:
            i = rng.randrange(len(lines))
            key = lines[i].split(" ", 1)[0]
            lines[i] = rng.choice([key, f"{key} nan", f"{key} -1", f"{key} x", ""])
            path.write_text("\n".join(lines) + "\n")
            return f"line {i + 1} -> {lines[i]!r}"
    damaged, what = mutate_bytes(raw, rng)
    path.write_bytes(damaged)
    return what


def _pick_file(root: Path, rng: random.Random, skip: tuple[str, ...] = ()) -> Path:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not any(s in p.name for s in skip))
    return rng.choice(files)


def run_dir_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A built run directory with one of its files damaged, given to `run` (embedded backend)."""
    dcqcn = rng.random() < 0.3
    run_dir = _copy(bases.run_dir(finished=False, dcqcn=dcqcn), work, "run")
    if dcqcn and rng.random() < 0.5:  # what only this link model reads
        path = run_dir / "ns3" / "config.txt"
    else:
        path = _pick_file(run_dir, rng, skip=(".astra-hetero",))
    what = _mutate_file(path, rng)
    rel = str(path.relative_to(run_dir))
    return Case(
        ["run", str(run_dir), "--quiet"],
        [run_dir],
        [run_dir / "result.json"],
        (rel, path.name, path.parent.name),
        f"{rel}: {what}",
    )


def report_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A finished run directory with its result damaged, given to `report`."""
    run_dir = _copy(bases.run_dir(finished=True), work, "run")
    path = run_dir / rng.choice(["result.json", "result.json", "manifest.json", "trace.json"])
    what = _mutate_file(path, rng)
    out = work / "report"
    return Case(
        ["report", str(run_dir), "-o", str(out), "--no-plots"],
        [out],
        [out / "report.json"],
        (path.name, "run"),
        f"{path.name}: {what}",
    )


def import_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """An ASTRA-sim study with one input damaged, given to `import`."""
    study = _copy(bases.study(), work, "study")
    path = _pick_file(study, rng, skip=("README",))
    what = _mutate_file(path, rng)
    out = work / "out"
    return Case(
        ["import", "-o", str(out), *import_options(study)],
        [out],
        [],
        (path.name, path.stem),
        f"{path.name}: {what}",
    )


def overlay_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A heterogeneity overlay with one field mutated, laid over an imported study by `run`."""
    imported = _copy(bases.imported(), work, "imported")
    overlay = {
        "npu_groups": [{"npus": "0-1", "gpu": "h100-sxm"}, {"npus": "2-3", "compute_factor": 0.5}],
        "links": [{"npus": "2-3", "bandwidth_factor": 0.25}, {"npus": 1, "dimension": 0, "gbps": 100}],
        "dynamics": [
            {"event": "device_slowdown", "npus": "0-1", "factor": 0.7, "start_ms": 0, "end_ms": 1},
            {"event": "jitter", "sigma": 0.05, "seed": 7},
        ],
        "iterations": 2,
    }
    data, mutation = mutate(overlay, rng)
    path = work / "hetero.yaml"
    _write_yaml(path, data)
    out = work / "out"
    return Case(
        ["run", str(imported), "--hetero", str(path), "-o", str(out), "--quiet"],
        [out, imported],
        [out / "result.json"],
        (*mutation.names, "hetero.yaml"),
        mutation.what,
    )


def _tiny_base() -> dict[str, Any]:
    from tests.test_pipeline import small_spec

    return {**small_spec(), "scope": {"layers_per_stage": 1, "micro_batches_per_replica": 1}}


def sweep_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A sweep file with one field mutated, given to `sweep`."""
    sweep = {
        "name": "fuzz",
        "base": _tiny_base(),
        "grid": {"cluster.node_groups[0].nic.gbps": [100, 400], "parallelism.tp": [1, 2]},
    }
    data, mutation = mutate(sweep, rng)
    path = work / "sweep.yaml"
    _write_yaml(path, data)
    out = work / "out"
    return Case(
        ["sweep", str(path), "-o", str(out), "--quiet"],
        [out],
        [],
        (*mutation.names, "sweep.yaml"),
        mutation.what,
        point_failures=True,
    )


def study_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A study file with one field mutated, given to `study`."""
    study = {
        "name": "fuzz",
        "title": "NIC speed",
        "base": _tiny_base(),
        "axes": {"nic": {"path": "cluster.node_groups[0].nic.gbps", "values": [100, 400]}},
        "derived": [
            {"name": "speedup", "of": "iteration_time_us", "kind": "ratio", "relative_to": {"nic": 100}}
        ],
        "tables": [{"title": "iteration", "rows": ["nic"], "values": ["iteration_time_us", "speedup"]}],
        "figures": [{"name": "it", "title": "t", "kind": "line", "x": "nic", "y": ["iteration_time_us"]}],
    }
    data, mutation = mutate(study, rng)
    path = work / "study.yaml"
    _write_yaml(path, data)
    out = work / "out"
    return Case(
        ["study", str(path), "-o", str(out), "--quiet"],
        [out],
        [],
        (*mutation.names, "study.yaml"),
        mutation.what,
        point_failures=True,
    )


def measured_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A spec whose calibration CSV or nccl-tests output is damaged, given to `run`."""
    import shutil

    data = {**bases.seeds["small"]}
    if rng.random() < 0.5:
        table = work / "cal.csv"
        table.write_text(
            "gpu,op,time_us,tp,seq_len\nh100-sxm,qkv_proj.fwd,12,2,256\nh100-sxm,mlp_up.fwd,30,2,256\n"
        )
        data["calibration"] = "cal.csv"
        what = _mutate_csv(table, rng)
    else:
        table = work / "nccl.txt"
        shutil.copy(DATA / "nccl_tests" / "all_reduce_perf_8xh100.txt", table)
        data["collectives"] = {"nccl_tests": {"intra_node": "nccl.txt"}}
        what = _mutate_nccl(table, rng)
    spec = work / "spec.yaml"
    _write_yaml(spec, data)
    out = work / "out"
    return Case(
        ["run", str(spec), "-o", str(out), "--quiet"],
        [out],
        [out / "result.json"],
        (table.name,),
        f"{table.name}: {what}",
    )


def _mutate_csv(path: Path, rng: random.Random) -> str:
    rows = [line.split(",") for line in path.read_text().splitlines()]
    if rng.random() < 0.3:
        damaged, what = mutate_bytes(path.read_bytes(), rng)
        path.write_bytes(damaged)
        return what
    i, j = rng.randrange(len(rows)), rng.randrange(len(rows[0]))
    rows[i][j] = str(rng.choice(["", "nan", "inf", "-1", "0", "1e308", "x", "2.5", "h100", "1e-300", "0x10"]))
    path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    return f"row {i} column {j} -> {rows[i][j]!r}"


def _mutate_nccl(path: Path, rng: random.Random) -> str:
    lines = path.read_text().splitlines()
    data_lines = [i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")]
    if rng.random() < 0.3 or not data_lines:
        damaged, what = mutate_bytes(path.read_bytes(), rng)
        path.write_bytes(damaged)
        return what
    i = rng.choice(data_lines)
    fields = lines[i].split()
    j = rng.randrange(len(fields))
    fields[j] = str(rng.choice(["nan", "inf", "-1", "0", "x", "1e308", "N/A", ""]))
    lines[i] = "  ".join(fields)
    path.write_text("\n".join(lines) + "\n")
    return f"line {i + 1} field {j} -> {fields[j]!r}"


def plan_case(bases: Bases, work: Path, rng: random.Random) -> Case:
    """A plan-search spec (`search:`) with one field mutated, given to `plan` (a few simulations)."""
    from tests.test_pipeline import small_spec

    data = {**small_spec(), "scope": {"layers_per_stage": 1, "micro_batches_per_replica": 1}}
    data["parallelism"] = {"global_batch_size": 4}
    data["search"] = {"tp": [1, 2], "micro_batch_size": [1], "max_simulations": 3}
    data, mutation = mutate(data, rng)
    spec = work / "spec.yaml"
    _write_yaml(spec, data)
    out = work / "out"
    return Case(
        ["plan", str(spec), "-o", str(out), "--no-plots", "--no-cache", "--jobs", "1", "--quiet"],
        [out],
        [out / "search.json"],
        (*mutation.names, "spec.yaml"),
        mutation.what,
    )


TARGETS: dict[str, Any] = {
    "spec-build": lambda b, w, r: spec_case("build", b, w, r),
    "spec-run": lambda b, w, r: spec_case("run", b, w, r),
    "spec-topology": lambda b, w, r: spec_case("topology", b, w, r),
    "spec-bytes": spec_bytes_case,
    "spec-plan": plan_case,
    "run-dir": run_dir_case,
    "report": report_case,
    "import": import_case,
    "overlay": overlay_case,
    "sweep": sweep_case,
    "study": study_case,
    "measured": measured_case,
}


def check(target: str, bases: Bases, work: Path, rng: random.Random) -> tuple[Case, Outcome, list[str]]:
    """Make one case of `target` in the empty directory `work`, run it, and judge it."""
    case = TARGETS[target](bases, work, rng)
    outcome = invoke(case.argv, case.outputs, case.results)
    return case, outcome, judge(outcome, case.names, case.point_failures)
