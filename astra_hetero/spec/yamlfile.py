"""Reading a YAML file that a user hands us (spec, include, sweep), with every failure a `SpecError`.

What can go wrong, and what the reader does about it, before any of the data is built:
- the file is missing, a directory, unreadable, huge or not UTF-8: one line naming the path and reason;
- deep nesting ([[[[...]]]] 50,000 levels) is found while streaming parser events, which needs no
  recursion; PyYAML's own composer would die of RecursionError;
- aliases that expand to billions of values ("billion laughs") or refer to themselves: the expanded
  size is counted on the node graph, sharing counted once, before anything is expanded;
- duplicate mapping keys (YAML says they are an error; PyYAML silently keeps the last): named with
  their path;
- integers with thousands of digits: refused with their position (Python refuses to convert them);
- control characters YAML does not allow (a NUL byte; `include: /proc/self/environ`): their position.
Errors give the line and column and the parser's reason but never quote the file: the file may not be
a spec at all (an `include:` of some other file must not echo its content).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from astra_hetero.errors import SpecError

MAX_FILE_BYTES = 16 * 1024**2  # a spec is kilobytes; this only stops a wrong file from being read whole
MAX_DEPTH = 64  # nesting of mappings/sequences; a spec needs about 6
MAX_VALUES = 1_000_000  # values after alias expansion; a spec has about a hundred
MAX_INT_DIGITS = 40

_INT_TAG = "tag:yaml.org,2002:int"


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses integers too long to be meant (and too long for Python to parse)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(c.isdigit() for c in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer with {digits} digits is out of range", node.start_mark
            )
        return super().construct_yaml_int(node)


_Loader.add_constructor(_INT_TAG, _Loader.construct_yaml_int)


def read_yaml(path: Path, field: str, what: str = "file", private: bool = False) -> Any:
    """The YAML document in `path`; SpecError(field, ...) naming `path` if it cannot be read.

    `private`: the file may not be ours to show (an include), so errors name no key of it either.
    """
    text = _read_text(Path(path), field, what)
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader refuses control characters (a NUL, /proc/self/environ) here
        _check_depth(text, path, field)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node, path, field, private)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise SpecError(field, f"{path}: not valid YAML ({describe_yaml_error(exc, text)})") from None
    except RecursionError:  # a safety net: the depth check should have stopped it
        raise SpecError(field, f"{path}: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml_mapping(path: Path, field: str, what: str) -> dict[str, Any]:
    """`read_yaml` of a file that must hold a mapping (a sweep, a study): anything else is an error
    naming the file, not the schema's "valid dictionary or instance of ..." without it."""
    data = read_yaml(path, field, what)
    if not isinstance(data, dict):
        kind = "nothing (is the file empty?)" if data is None else f"a {type(data).__name__}"
        raise SpecError(field, f"{path}: a {what} holds a mapping of keys, not {kind}")
    return data


def _read_text(path: Path, field: str, what: str) -> str:
    try:
        if not path.exists():
            raise SpecError(field, f"{what} not found: {path}")
        if not path.is_file():
            raise SpecError(field, f"{path}: not a {what} (a directory or special file)")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SpecError(field, f"{path}: {size:,} bytes is too large for a {what}")
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(field, f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(field, f"{path}: not UTF-8 text (byte {exc.start} cannot be decoded)") from None


def describe_yaml_error(exc: yaml.YAMLError, text: str) -> str:
    """The parser's reason and position, without the snippet of the file PyYAML would print."""
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"line {line}, column {column}: control character U+{code:04X} is not allowed (a binary file?)"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return where + (exc.problem or exc.context or "invalid")
    return type(exc).__name__


def _check_depth(text: str, path: Path, field: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark is not None else "?"
                raise SpecError(field, f"{path}: nested more than {MAX_DEPTH} levels deep (line {line})")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_graph(root: yaml.Node, path: Path, field: str, private: bool) -> None:
    """Duplicate keys, self-referring aliases and the expanded size, each node visited once."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, str, bool]] = [(root, "", False)]
    while stack:
        node, where, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node, where, path, field, private)
            size[key] = 1 + sum(size[id(child)] for child, _ in children)
            if size[key] > MAX_VALUES:
                raise SpecError(
                    field,
                    f"{path}: expands to more than {MAX_VALUES:,} values through aliases (&name / *name)",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise SpecError(field, f"{path}: an alias refers to itself ({_line(node)})")
        on_path.add(key)
        stack.append((node, where, True))
        stack.extend(
            (child, child_where, False) for child, child_where in _children(node, where, path, field, private)
        )


def _line(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}" if node.start_mark is not None else "unknown line"


def _children(
    node: yaml.Node, where: str, path: Path, field: str, private: bool
) -> list[tuple[yaml.Node, str]]:
    if isinstance(node, yaml.SequenceNode):
        return [(child, f"{where}[{i}]") for i, child in enumerate(node.value)]
    if not isinstance(node, yaml.MappingNode):
        return []
    seen: set[tuple[str, Any]] = set()
    children = []
    for key_node, value_node in node.value:
        child_where = where
        if isinstance(key_node, yaml.ScalarNode):
            child_where = f"{where}.{key_node.value}" if where else str(key_node.value)
            if (key_node.tag, key_node.value) in seen:
                named = "a key" if private else f"key {child_where!r}"
                raise SpecError(
                    field or child_where,
                    f"{path}: duplicate {named} ({_line(key_node)}); keys must be unique",
                )
            seen.add((key_node.tag, key_node.value))
        children += [(key_node, where), (value_node, child_where)]
    return children
