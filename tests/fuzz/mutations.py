"""Changes to a valid input: a document's values and keys, a YAML text's structure, a file's bytes."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def mutate_file(path: Path, rng: random.Random) -> str:
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
                write_yaml(path, changed)
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


def mutate_csv(path: Path, rng: random.Random) -> str:
    rows = [line.split(",") for line in path.read_text().splitlines()]
    if rng.random() < 0.3:
        damaged, what = mutate_bytes(path.read_bytes(), rng)
        path.write_bytes(damaged)
        return what
    i, j = rng.randrange(len(rows)), rng.randrange(len(rows[0]))
    rows[i][j] = str(rng.choice(["", "nan", "inf", "-1", "0", "1e308", "x", "2.5", "h100", "1e-300", "0x10"]))
    path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    return f"row {i} column {j} -> {rows[i][j]!r}"


def mutate_nccl(path: Path, rng: random.Random) -> str:
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


def write_yaml(path: Path, data: Any) -> None:
    import yaml

    path.write_text(yaml.safe_dump(data, allow_unicode=True))
