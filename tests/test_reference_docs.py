"""Checks that the Ray reference pages in docs/reference/ match the installed Ray.

The pages are served to agents as MCP resources, so a wrong API name or CLI flag
in them turns into a wrong tool call. These tests need no running Ray cluster:

* every page carries front matter whose ``topic`` is its file name and whose
  ``ray_version`` is the installed Ray;
* every dotted ``ray.*`` name in a page (prose and code), and every name imported
  with ``from ray.x import y`` in code, resolves in the installed Ray: by import
  and getattr, or - when the module cannot be imported because an optional
  dependency is missing (ray.data needs pandas) or the library was removed
  (ray.workflow raises on import) - by reading its source with ``ast``;
* every ``ray ...`` / ``serve ...`` command in a code block or inline code span
  exists (``<venv>/bin/ray <words> --help`` succeeds; a ``{a|b}`` argument must
  be one of its choices), and the long flags written after it appear in that
  command's ``--help`` text (hidden options therefore fail on purpose);
* names that Ray removed or renamed only appear on lines that say so.

Failures list every offending page and name at once.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = REPO_ROOT / "docs" / "reference"
BIN_DIR = Path(sys.executable).parent

# Dotted names that look like Python attributes but are not. Keep this empty
# unless a page really needs such text; justify every entry.
NAME_ALLOWLIST: frozenset = frozenset()

# Names from older Ray (or from the seed material) that must not be presented
# as current API. A line may mention one only to say it is gone.
STALE_NAMES = (
    "max_concurrent_queries",
    "target_num_ongoing_requests_per_replica",
    "HuggingFaceTrainer",
    "workflow.step",
    "num_rollout_workers",
    "sendsend",
)
STALE_MARKERS = ("removed", "renamed", "deprecated", "stale", "replaced")

# A dotted ray name. Not preceded by a word char, dot, slash or dash (so
# "docs.ray.io" and URLs do not match) and not followed by "/" (so label keys
# such as "ray.io/node-id" do not match).
DOTTED_NAME_RE = re.compile(r"(?<![\w./-])ray(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?![\w/])")
# "from ray.util.state import list_actors, get_actor" (also the parenthesised form).
FROM_IMPORT_RE = re.compile(
    r"^\s*from\s+(?P<module>ray(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s+import\s+"
    r"(?P<names>\([^)]*\)|[^\n]+)",
    re.MULTILINE,
)
FENCE_RE = re.compile(r"^(```|~~~)")
INLINE_CODE_RE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
# A subcommand word (or an argument that a group resolves, like raylet.out).
WORD_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")
LONG_FLAG_RE = re.compile(r"^--[a-z][a-z0-9-]*")
SHELL_SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", "$(", ">", ">>", "<"}
EXECUTABLES = ("ray", "serve")
COMMAND_HINT_RE = re.compile(r"(^|[\s|&;(=])(ray|serve)(\s|$)")
ENV_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# "<job_id>"-style placeholders in examples; not shell redirections.
PLACEHOLDER_RE = re.compile(r"<[A-Za-z_][A-Za-z0-9_.-]*>")


# --------------------------------------------------------------------------
# Page loading
# --------------------------------------------------------------------------


def _pages() -> list[Path]:
    return sorted(DOCS_DIR.glob("*.md"))


@cache
def _split_page(path: Path) -> tuple[dict | None, str, str | None]:
    """Return (front matter, body, error) for one page."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return None, text, "does not start with a '---' front matter line"
    end = text.find("\n---\n", 4)
    if end == -1:
        return None, text, "front matter is not closed by a '---' line"
    try:
        meta = yaml.safe_load(text[4:end])
    except yaml.YAMLError as exc:
        return None, text[end + 5 :], f"front matter is not valid YAML: {exc}"
    if not isinstance(meta, dict):
        return None, text[end + 5 :], "front matter is not a mapping"
    return meta, text[end + 5 :], None


def _code_regions(body: str) -> Iterator[tuple[str, str]]:
    """Yield ("block", text) for fenced blocks and ("inline", text) for spans."""
    in_block = False
    block: list[str] = []
    for line in body.splitlines():
        if FENCE_RE.match(line.strip()):
            if in_block:
                yield "block", "\n".join(block)
                block = []
            in_block = not in_block
            continue
        if in_block:
            block.append(line)
        else:
            for match in INLINE_CODE_RE.finditer(line):
                yield "inline", match.group(1)
    if in_block and block:
        yield "block", "\n".join(block)


# --------------------------------------------------------------------------
# Dotted-name resolution
# --------------------------------------------------------------------------

RAY_SPEC = importlib.util.find_spec("ray")
RAY_ROOT = Path(RAY_SPEC.origin).parent if RAY_SPEC and RAY_SPEC.origin else None


def _module_file(modname: str) -> Path | None:
    """Source (or extension) file of a ray module, found without importing it."""
    if RAY_ROOT is None:
        return None
    parts = modname.split(".")
    if parts[0] != "ray":
        return None
    base = RAY_ROOT.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if len(parts) > 1:
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        so = sorted(base.parent.glob(base.name + ".*so")) + sorted(base.parent.glob(base.name + ".so"))
        if so:
            return so[0]
    return None


@cache
def _module_ast(modname: str) -> ast.Module | None:
    path = _module_file(modname)
    if path is None or path.suffix != ".py":
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return None


def _top_level_statements(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, looking inside if/try/with but not defs."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (ast.If, ast.With)):
            yield from _top_level_statements(stmt.body)
            yield from _top_level_statements(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _top_level_statements(block)
            for handler in stmt.handlers:
                yield from _top_level_statements(handler.body)


def _assigned_names(stmt: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    names = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def _absolute_module(modname: str, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    package = modname.split(".")
    if _module_file(modname) is None or _module_file(modname).name != "__init__.py":
        package = package[:-1]
    if node.level > 1:
        package = package[: -(node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _class_has(modname: str, cls: ast.ClassDef, attr: str, depth: int) -> bool:
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == attr:
                return True
        elif attr in _assigned_names(stmt):
            return True
    if depth > 3:
        return False
    for base in cls.bases:
        if isinstance(base, ast.Name) and _static_resolves(modname, [base.id, attr], depth + 1):
            return True
    return False


def _static_resolves(modname: str, rest: Sequence[str], depth: int = 0) -> bool:
    """Whether ``modname.rest...`` is defined, judged from source alone."""
    if not rest:
        return _module_file(modname) is not None
    if depth > 4:
        return False
    head, tail = rest[0], list(rest[1:])
    if _module_file(f"{modname}.{head}") is not None:
        return _static_resolves(f"{modname}.{head}", tail, depth)
    tree = _module_ast(modname)
    if tree is None:
        return False
    for stmt in _top_level_statements(tree.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name == head:
                return not tail
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name == head:
                if not tail:
                    return True
                return len(tail) == 1 and _class_has(modname, stmt, tail[0], depth)
        elif isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) != head:
                    continue
                source = _absolute_module(modname, stmt)
                if source is None:
                    continue
                if source == "ray" or source.startswith("ray."):
                    return _static_resolves(source, [alias.name, *tail], depth + 1)
                return not tail
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname == head:
                    return _static_resolves(alias.name, tail, depth + 1)
        elif head in _assigned_names(stmt):
            if head == "__all__":
                continue
            return not tail
    # Listed in __all__ but bound in a way we cannot see (e.g. lazy loading).
    for stmt in _top_level_statements(tree.body):
        if isinstance(stmt, ast.Assign) and "__all__" in _assigned_names(stmt):
            value = stmt.value
            if isinstance(value, (ast.List, ast.Tuple)):
                exported = {
                    elt.value
                    for elt in value.elts
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
                }
                if head in exported and not tail:
                    return True
    return False


def _attribute_of(obj: object, attr: str) -> object:
    """getattr, falling back to declared fields of dataclasses/pydantic models."""
    try:
        return getattr(obj, attr)
    except AttributeError:
        if isinstance(obj, type):
            for mapping in ("__dataclass_fields__", "model_fields", "__fields__"):
                fields = getattr(obj, mapping, None)
                if isinstance(fields, dict) and attr in fields:
                    return fields[attr]
            for klass in obj.__mro__:
                if attr in getattr(klass, "__annotations__", {}):
                    return None
        raise


@cache
def _resolve_error(name: str) -> str | None:
    """None when ``name`` exists in the installed Ray, else a reason."""
    if name in NAME_ALLOWLIST:
        return None
    parts = name.split(".")
    split = 1
    for i in range(len(parts), 0, -1):
        if _module_file(".".join(parts[:i])) is not None:
            split = i
            break
    modname, rest = ".".join(parts[:split]), parts[split:]
    try:
        obj = importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == "ray" or missing.startswith("ray."):
            return f"cannot import {modname}: {exc}"
        if _static_resolves(modname, rest):
            return None
        return f"not defined in the source of {modname} (import needs {missing!r})"
    except Exception as exc:  # optional deps guarded by ray, removed libraries
        if _static_resolves(modname, rest):
            return None
        return f"not defined in the source of {modname} (import failed: {exc!r:.80})"
    for depth, attr in enumerate(rest):
        try:
            obj = _attribute_of(obj, attr)
        except AttributeError:
            where = ".".join(parts[: split + depth])
            return f"{where} has no attribute {attr!r}"
    return None


def _dotted_names(body: str) -> list[str]:
    """Every dotted ray name, plus ``ray.mod.name`` for ``from ray.mod import name``."""
    names = {m.group(0) for m in DOTTED_NAME_RE.finditer(body)}
    for match in FROM_IMPORT_RE.finditer(body):
        listed = re.sub(r"#[^\n]*", "", match.group("names")).strip().strip("()")
        for item in listed.split(","):
            imported = item.split(" as ")[0].strip()
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", imported):
                names.add(f"{match.group('module')}.{imported}")
    return sorted(names)


# --------------------------------------------------------------------------
# CLI extraction and checking
# --------------------------------------------------------------------------


def _tokens(segment: str) -> list[str]:
    lexer = shlex.shlex(segment, posix=True, punctuation_chars="|&;()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes in an example; fall back
        return segment.split()


def _commands_in(code: str) -> Iterator[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Yield (executable, words, long flags) for each ray/serve command in code.

    A command starts at the beginning of a line (after an optional "$ " prompt)
    or after a shell separator such as "&&" or "|". Up to two subcommand words
    are kept; long flags are collected until a bare "--".
    """
    joined = re.sub(r"\\\n", " ", code)
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped.startswith("$ "):
            stripped = stripped[2:]
        if not COMMAND_HINT_RE.search(stripped):
            continue
        tokens = _tokens(PLACEHOLDER_RE.sub("PLACEHOLDER", stripped))
        for start in range(len(tokens)):
            if start and tokens[start - 1] not in SHELL_SEPARATORS:
                continue
            position = start
            while position < len(tokens) and ENV_ASSIGNMENT_RE.match(tokens[position]):
                position += 1
            if position < len(tokens) and tokens[position] in EXECUTABLES:
                yield _parse_command(tokens[position:])


def _parse_command(tokens: Sequence[str]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    exe = tokens[0]
    words: list[str] = []
    flags: list[str] = []
    i = 1
    while i < len(tokens) and len(words) < 2 and WORD_RE.match(tokens[i]):
        words.append(tokens[i])
        i += 1
    for token in tokens[i:]:
        if token in SHELL_SEPARATORS or token == "--":
            break
        match = LONG_FLAG_RE.match(token)
        if match and match.group(0) != "--help":
            flags.append(match.group(0))
    return exe, tuple(words), tuple(flags)


def _page_commands(body: str) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    found = []
    for kind, code in _code_regions(body):
        if kind == "inline" and not code.startswith(tuple(e + " " for e in EXECUTABLES)):
            continue
        found.extend(_commands_in(code))
    return found


# The help texts come from the installed console scripts (<venv>/bin/ray and
# <venv>/bin/serve), each run with "<words> --help". All of them run inside ONE
# interpreter: a fresh `ray` process spends ~1.5 s (far more on a loaded host)
# importing Ray, so one process per command made this test take minutes. The
# script file is executed exactly as the executable runs it, so the text is
# what `ray <words> --help` prints; a self-check test compares the two.
_HELP_RUNNER = r"""
import contextlib, io, json, runpy, sys
results = []
for script, args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    sys.argv = [script, *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # a crash is a failed help call, not a runner crash
        code, err = 1, io.StringIO(repr(exc))
    results.append([code, out.getvalue() + err.getvalue()])
sys.__stdout__.write("\n" + json.dumps(results) + "\n")
"""
_HELP_ENV = {"COLUMNS": "80", "TERM": "dumb", "RAY_USAGE_STATS_ENABLED": "0"}


def _help_texts(keys: Sequence[tuple[str, tuple[str, ...]]]) -> dict:
    """Map (exe, words) -> (exit code, `exe words --help` output), in one process."""
    if not keys:
        return {}
    payload = [[str(BIN_DIR / exe), [*words, "--help"]] for exe, words in keys]
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_RUNNER, json.dumps(payload)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **_HELP_ENV},
        stdin=subprocess.DEVNULL,
    )
    try:
        results = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise AssertionError(f"help runner failed (exit {proc.returncode}): {proc.stderr[-2000:]}") from None
    return {key: (code, text) for key, (code, text) in zip(keys, results, strict=True)}


def _run_help(exe: str, words: tuple[str, ...]) -> tuple[int, str]:
    """One real `<venv>/bin/<exe> <words> --help` process (used by the self-check)."""
    cmd = [str(BIN_DIR / exe), *words, "--help"]
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **_HELP_ENV},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, f"could not run {' '.join(cmd)}: {exc}"
    return proc.returncode, proc.stdout + proc.stderr


def _usage_choices(help_text: str) -> tuple[list[str], list[str]]:
    """(usage path words, allowed values of a {a|b|c} positional) from help."""
    usage_lines = []
    for line in help_text.splitlines():
        if usage_lines and not line.strip():
            break
        if line.startswith("Usage:") or usage_lines:
            usage_lines.append(line.strip())
    usage = " ".join(usage_lines)
    path = []
    for word in usage.split()[1:]:
        if word.startswith("[") or word.startswith("{") or word.isupper():
            break
        path.append(word)
    braces = re.search(r"\{([^}]*)\}", "".join(usage_lines))
    choices = braces.group(1).split("|") if braces else []
    return path, [c.strip() for c in choices]


def _command_problem(exe: str, words: tuple[str, ...], flags: tuple[str, ...], helps: dict) -> str | None:
    code, text = helps[(exe, words)]
    shown = " ".join((exe, *words))
    if code != 0:
        last = text.strip().splitlines()[-1] if text.strip() else ""
        return f"`{shown} --help` failed (exit {code}): {last}"
    path, choices = _usage_choices(text)
    extra = [w for w in words if w not in path[1:]]
    if choices and extra and extra[0] not in choices:
        return f"`{shown}`: {extra[0]!r} is not one of {choices}"
    missing = [f for f in flags if not re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", text)]
    if missing:
        return f"`{shown}` has no flag(s) {', '.join(missing)} in its --help"
    return None


# --------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------


def test_reference_directory_holds_markdown_pages():
    assert DOCS_DIR.is_dir(), f"{DOCS_DIR} is missing"
    assert _pages(), f"no *.md pages in {DOCS_DIR}"


def test_every_page_has_front_matter_naming_its_topic_and_the_installed_ray():
    import ray

    problems = []
    for page in _pages():
        meta, _, error = _split_page(page)
        if error:
            problems.append(f"{page.name}: {error}")
            continue
        if meta.get("topic") != page.stem:
            problems.append(f"{page.name}: topic {meta.get('topic')!r} != {page.stem!r}")
        for key in ("title", "summary"):
            if not isinstance(meta.get(key), str) or not meta[key].strip():
                problems.append(f"{page.name}: {key} is missing or empty")
        if str(meta.get("ray_version")) != ray.__version__:
            problems.append(
                f"{page.name}: ray_version {meta.get('ray_version')!r} != installed {ray.__version__!r}"
            )
        sources = meta.get("sources")
        if not isinstance(sources, list) or not [s for s in sources if str(s).strip()]:
            problems.append(f"{page.name}: sources must be a non-empty list")
    assert not problems, "front matter problems:\n" + "\n".join(problems)


def test_every_dotted_ray_name_resolves_in_the_installed_ray():
    problems = []
    for page in _pages():
        _, body, _ = _split_page(page)
        for name in _dotted_names(body):
            reason = _resolve_error(name)
            if reason:
                problems.append(f"{page.name}: {name} -> {reason}")
    assert not problems, "names that do not exist in the installed Ray:\n" + "\n".join(problems)


@pytest.mark.live
def test_every_cli_command_and_flag_in_code_exists_in_the_installed_cli():
    per_page = {}
    for page in _pages():
        _, body, _ = _split_page(page)
        per_page[page.name] = _page_commands(body)
    wanted = sorted({(exe, words) for cmds in per_page.values() for exe, words, _ in cmds})
    helps = _help_texts(wanted)
    problems = []
    for page_name, cmds in per_page.items():
        seen = set()
        for exe, words, flags in cmds:
            problem = _command_problem(exe, words, flags, helps)
            if problem and problem not in seen:
                seen.add(problem)
                problems.append(f"{page_name}: {problem}")
    assert not problems, "CLI commands or flags not in the installed Ray:\n" + "\n".join(problems)


def test_stale_api_names_only_appear_on_lines_that_say_they_are_gone():
    problems = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            lowered = line.lower()
            for stale in STALE_NAMES:
                if stale in line and not any(m in lowered for m in STALE_MARKERS):
                    problems.append(f"{page.name}:{number}: {stale!r} in {line.strip()!r}")
    assert not problems, (
        "stale names presented as current (say removed/renamed/deprecated/"
        "stale/replaced on the same line):\n" + "\n".join(problems)
    )


# --------------------------------------------------------------------------
# Self-checks of the extractors, so a silent regex change cannot hollow out
# the tests above.
# --------------------------------------------------------------------------


def test_name_extractor_skips_urls_and_label_keys_but_keeps_api_names():
    text = (
        "See docs.ray.io and https://ray.io. Label `ray.io/node-id`. "
        "Call `ray.util.state.list_actors(` and ray.get."
    )
    assert _dotted_names(text) == ["ray.get", "ray.util.state.list_actors"]
    code = "from ray.util.state import (\n    list_actors,  # comment\n    get_log as gl,\n)\n"
    assert _dotted_names(code) == ["ray.util.state", "ray.util.state.get_log", "ray.util.state.list_actors"]


def test_name_resolver_accepts_real_names_and_rejects_invented_ones():
    assert _resolve_error("ray.util.state.list_actors") is None
    assert _resolve_error("ray.util.placement_group.PlacementGroup.ready") is None
    assert _resolve_error("ray.util.does_not_exist") is not None
    assert _resolve_error("ray.exceptions.NoSuchError") is not None


def test_static_resolver_reads_modules_that_need_missing_dependencies():
    # ray.data needs pandas/pyarrow; the static path must still find its API.
    assert _static_resolves("ray.data", ["Dataset", "map_batches"])
    assert _static_resolves("ray.data", ["read_parquet"])
    assert not _static_resolves("ray.data", ["read_nonsense"])


def test_command_extractor_finds_commands_flags_and_stops_at_double_dash():
    code = (
        "$ ray job submit --address http://127.0.0.1:8265 \\\n"
        "    --working-dir . -- python train.py --epochs 3\n"
        "ray list actors --filter state=DEAD && serve status\n"
        "ray logs actor --id <ACTOR_ID> --tail 100 > out.txt\n"
        "RAY_ADDRESS=http://127.0.0.1:8265 ray job list\n"
        "# ray is not a command in a comment\n"
        'subprocess.run("ray status", shell=True)\n'
    )
    assert list(_commands_in(code)) == [
        ("ray", ("job", "submit"), ("--address", "--working-dir")),
        ("ray", ("list", "actors"), ("--filter",)),
        ("serve", ("status",), ()),
        ("ray", ("logs", "actor"), ("--id", "--tail")),
        ("ray", ("job", "list"), ()),
    ]


@pytest.mark.live
def test_batched_help_is_what_the_ray_executable_prints():
    good, bad = ("ray", ("job", "submit")), ("ray", ("job", "sumbit"))
    batched = _help_texts([good, bad])
    code, text = _run_help(*good)
    assert code == 0
    assert batched[good][0] == 0
    assert " ".join(batched[good][1].split()) == " ".join(text.split())
    assert batched[bad][0] != 0
