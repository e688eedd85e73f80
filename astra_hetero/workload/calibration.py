"""Calibration tables: measured operator times that override the cost model.

CSV, UTF-8, one header line. Columns: `gpu`, `op`, `time_us` (required); `tp`, `micro_batch_size`,
`seq_len` (optional, blank = the run's own value); `note` (optional, ignored). Any other column is an
error, so a misspelled column name cannot silently drop a shape.

- `gpu` is a GPU label as the manifest writes it (a catalog preset key such as `h100-sxm`, or the name a
  spec gives a GPU of its own), matched case-insensitively with `_`/space as `-`. A label that is
  neither a catalog preset nor a GPU of the spec is an error (a misspelling would otherwise be ignored).
- `op` is `<operator>.<pass>` with pass `fwd`, `bwd` or `step`, e.g. `qkv_proj.fwd`, `attention.bwd`,
  `optimizer_step.step`; an unknown operator is an error that lists the closest names. `step` operators
  (optimizer, gradient norm, gradient zeroing) are timed per million parameters.
- `time_us` is the operator's time for one micro-batch on one TP rank: finite, > 0 and at most 10⁹ µs.

Errors name the file, the line and the reason. They quote the offending cell (with a "did you mean")
only for a table in the spec's own directory: `calibration:` may name any file, and an error must not
show the content of a file that is not the user's table (the spec marks it, `Spec.calibration_private`).

How a row applies to an operator at the run's shape x (micro-batch size, sequence length, TP degree):
1. Rows that name x exactly (blank columns match anything) win; the most specific one is used.
2. Otherwise every row is a measurement at its own shape, placed on the operator's *work* axis (its
   FLOPs, or bytes for memory-bound operators, at that shape as the model counts them). Between two
   measured works the time is interpolated linearly in log(work)–log(time); beyond the measured range it
   follows the model from the nearest measurement (time = measured × model(x) / model(measured shape)).
3. A GPU described relative to a preset (`{preset: h100-sxm, name: my-gpu, …}`) uses rows under its own
   label; without any for an operator, the preset's rows carry over as a correction of the model:
   time = preset-row time × model(this GPU) / model(the preset).
"""

from __future__ import annotations

import csv
import difflib
import io
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from astra_hetero.errors import SpecError
from astra_hetero.spec.catalog import normalize_key
from astra_hetero.workload.costs import PHASES, operator_names
from astra_hetero.workload.ops import Shape

FIELD = "calibration"
REQUIRED_COLUMNS = ("gpu", "op", "time_us")
SHAPE_COLUMNS = ("tp", "micro_batch_size", "seq_len")
COLUMNS = (*REQUIRED_COLUMNS, *SHAPE_COLUMNS, "note")
MAX_TIME_US = 1e9
MAX_DIMENSION = 10_000_000


@dataclass(frozen=True)
class CalibrationRow:
    line: int
    gpu: str
    op: str
    phase: str
    time_ns: float
    tp: int | None = None
    micro_batch_size: int | None = None
    seq_len: int | None = None

    def shape_for(self, x: Shape) -> Shape:
        """The shape this row measured, with its blank columns taken from `x`."""
        return replace(x, t=self.tp or x.t, b=self.micro_batch_size or x.b, s=self.seq_len or x.s)

    @property
    def specificity(self) -> int:
        return sum(v is not None for v in (self.tp, self.micro_batch_size, self.seq_len))

    @property
    def key(self) -> tuple[object, ...]:
        return (self.gpu, self.op, self.phase, self.tp, self.micro_batch_size, self.seq_len)


@dataclass(frozen=True)
class CalibrationTable:
    path: str
    rows: tuple[CalibrationRow, ...]
    private: bool = False  # errors quote none of its content (see the module's docstring)

    def rows_for(self, gpu_label: str, op: str, phase: str) -> list[CalibrationRow]:
        gpu = normalize_key(gpu_label)
        return [r for r in self.rows if r.gpu == gpu and r.op == op and r.phase == phase]

    def check_gpus(self, known: Iterable[str]) -> None:
        """Every row's GPU must be a catalog preset or a GPU of the spec (else it would never apply)."""
        labels = sorted({normalize_key(k) for k in known})
        for row in self.rows:
            if row.gpu not in labels:
                close = [] if self.private else difflib.get_close_matches(row.gpu, labels, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(labels)}"
                raise SpecError(
                    FIELD, f"{self.path}:{row.line}: unknown GPU{_quoted(row.gpu, self.private)}{hint}"
                )


def load_calibration(path: str | Path, private: bool = False) -> CalibrationTable:
    """The table at `path`; with `private`, errors give line and reason but no content of the file."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(FIELD, f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SpecError(FIELD, f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from None
    return CalibrationTable(str(path), tuple(_parse(text, path, private)), private)


def _quoted(text: str, private: bool) -> str:
    """` 'text'` to follow a noun in an error, or nothing for a private file."""
    return "" if private else f" {text!r}"


def _parse(text: str, path: Path, private: bool) -> list[CalibrationRow]:
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[CalibrationRow] = []
    seen: dict[tuple[object, ...], int] = {}
    names = operator_names()
    try:
        header = [c.strip() for c in next(reader, [])]
        _check_header(header, path, private)
        for raw in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in raw):
                continue
            if len(raw) != len(header):
                raise SpecError(FIELD, f"{path}:{line}: expected {len(header)} fields, found {len(raw)}")
            cells = dict(zip(header, (c.strip() for c in raw), strict=True))
            row = _row(cells, f"{path}:{line}", line, names, private)
            if row.key in seen:
                raise SpecError(FIELD, f"{path}:{line}: repeats the row of line {seen[row.key]}")
            seen[row.key] = line
            rows.append(row)
    except csv.Error as exc:
        raise SpecError(FIELD, f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
    return rows


def _check_header(header: list[str], path: Path, private: bool) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SpecError(FIELD, f"{path}:1: missing column(s) {', '.join(missing)}")
    unknown = [(i, c) for i, c in enumerate(header, 1) if c not in COLUMNS]
    if unknown:
        named = (
            f"at position(s) {', '.join(str(i) for i, _ in unknown)}"
            if private
            else ", ".join(c for _, c in unknown)
        )
        raise SpecError(FIELD, f"{path}:1: unknown column(s) {named}; known: {', '.join(COLUMNS)}")
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise SpecError(FIELD, f"{path}:1: repeated column(s) {', '.join(repeated)}")


def _row(
    cells: dict[str, str], where: str, line: int, names: dict[str, frozenset[str]], private: bool
) -> CalibrationRow:
    if not cells["gpu"]:
        raise SpecError(FIELD, f"{where}: gpu is empty")
    op, _, phase = cells["op"].rpartition(".")
    if phase not in PHASES or not op:
        raise SpecError(
            FIELD,
            f"{where}: op{_quoted(cells['op'], private)} must be <operator>.<pass> with pass "
            f"{'/'.join(PHASES)}",
        )
    if op not in names[phase]:
        close = [] if private else difflib.get_close_matches(op, sorted(names[phase]), n=3)
        hint = (
            f"did you mean {', '.join(f'{c}.{phase}' for c in close)}?"
            if close
            else f"known: {', '.join(sorted(names[phase]))}"
        )
        raise SpecError(FIELD, f"{where}: unknown operator{_quoted(cells['op'], private)}; {hint}")
    return CalibrationRow(
        line,
        normalize_key(cells["gpu"]),
        op,
        phase,
        _time_us(cells["time_us"], where, private) * 1e3,
        *(_dimension(cells.get(c, ""), c, where, private) for c in SHAPE_COLUMNS),
    )


def _time_us(text: str, where: str, private: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(FIELD, f"{where}: time_us{_quoted(text, private)} is not a number") from None
    if not (math.isfinite(value) and 0 < value <= MAX_TIME_US):
        raise SpecError(
            FIELD, f"{where}: time_us{_quoted(text, private)} must be finite, > 0 and ≤ {MAX_TIME_US:g}"
        )
    return value


def _dimension(text: str, column: str, where: str, private: bool) -> int | None:
    if text == "":
        return None
    if not text.isdigit() or not 0 < int(text) <= MAX_DIMENSION:
        raise SpecError(
            FIELD, f"{where}: {column}{_quoted(text, private)} must be a whole number in 1..{MAX_DIMENSION}"
        )
    return int(text)


def calibrated_time_ns(
    rows: list[CalibrationRow],
    x: Shape,
    work_at: Callable[[Shape], float],
    model_at: Callable[[Shape], float],
) -> float:
    """The operator's time at `x` from measured rows (see the module docstring for the rules).

    `work_at(shape)` is the operator's FLOPs (or bytes) at a shape; `model_at(shape)` its model time.
    """
    exact = [r for r in rows if r.shape_for(x) == x]
    if exact:
        return max(exact, key=lambda r: r.specificity).time_ns
    points: dict[float, list[tuple[float, Shape]]] = {}
    for row in rows:
        shape = row.shape_for(x)
        points.setdefault(work_at(shape), []).append((row.time_ns, shape))
    works = sorted(points)
    target = work_at(x)
    if target in points or target < works[0] or target > works[-1]:
        nearest = target if target in points else works[0] if target < works[0] else works[-1]
        return _mean_log([t * model_at(x) / model_at(shape) for t, shape in points[nearest]])
    upper = next(w for w in works if w > target)
    lower = max(w for w in works if w < target)
    t_low, t_high = (_mean_log([t for t, _ in points[w]]) for w in (lower, upper))
    fraction = math.log(target / lower) / math.log(upper / lower)
    return math.exp(math.log(t_low) + fraction * math.log(t_high / t_low))


def _mean_log(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))
