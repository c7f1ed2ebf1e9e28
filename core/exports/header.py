"""``header``: a C/C++ header with one ``#if``/``#elif`` block per GPU model and a default block.

Compile with ``-DKERNELFARM_TARGET_<GPU MODEL>`` (e.g. ``-DKERNELFARM_TARGET_NVIDIA_H100_80GB_HBM3``)
to get that GPU model's configs; without one the default block applies (the config that is best on
most of the recorded GPU models and problems). Every block defines the same macros, so code
compiles for any target:

- ``<KERNEL>_<PARAM>``: the config for the kernel's default problem (or the first recorded one);
- ``<KERNEL>_<PROBLEM TAG>_<PARAM>`` for each recorded problem, only when the kernel was measured on
  more than one problem (the problem differs). A GPU model without a measurement of that problem
  repeats its own unsuffixed value.

Tune values, problem keys and device names come from users and workers, so nothing of theirs is
written raw: a string value is a string literal of exactly its UTF-8 bytes, a comment holds only
printable ASCII and never ``*/``, and a name C cannot keep apart from another (``bs`` and ``BS`` are
both ``<KERNEL>_BS``) refuses the export rather than define one macro twice.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports.model import BestEntry, BestExport

TARGET_PREFIX = "KERNELFARM_TARGET_"
# What a C string literal spells with a backslash; every other byte outside printable ASCII is written
# as a 3-digit octal escape (a hex escape would swallow the hex digits after it: "\x41B" is one byte).
NAMED_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
C_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
# The integers a bare decimal constant spells in C and C++: beyond, it is "too large for its type" (an
# error) or "so large that it is unsigned" (2**63, and -2**63, which is "-" applied to 2**63).
C_INTEGER_MAX = 2**63 - 1


def macro_name(*parts: str) -> str:
    names = (re.sub(r"[^A-Za-z0-9]+", "_", part).strip("_").upper() for part in parts)
    return "_".join(name for name in names if name)  # an empty part would leave a "__"


def problem_tag(problem_key: str) -> str:
    """``M=4096,N=4096`` → ``M4096_N4096``. A character a C name cannot hold is spelled ``X`` and its
    UTF-8 bytes in hex, so that problems differing only there keep apart: ``dt=a-b`` →
    ``DTA_X2D_B`` (``dt=a_b`` → ``DTA_B``, ``alpha=0.5`` → ``ALPHA0_X2E_5``)."""
    items = (item.partition("=") for item in problem_key.split(","))
    return macro_name(*(_spelled(name) + _spelled(value) for name, _, value in items))


def target_macro(gpu_model: str) -> str:
    return TARGET_PREFIX + macro_name(gpu_model)


def include_guard(kernel: str) -> str:
    """``KERNELFARM_<KERNEL>_<HASH>_CONFIG_H``: the hash of the exact name keeps apart kernels whose
    names give the same macro name (``probe-num``, ``probe_num``); with one guard, the second header
    included would silently be empty."""
    digest = hashlib.sha256(kernel.encode("utf-8", "surrogatepass")).hexdigest()[:12].upper()
    return f"KERNELFARM_{macro_name(kernel)}_{digest}_CONFIG_H"


def c_literal(value: Any) -> str:
    """``value`` as a C/C++ constant: a number as written, a boolean as 1 or 0, anything else as a
    string literal that holds exactly its UTF-8 bytes."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + _string_body(str(value)) + '"'


def write(export: BestExport) -> str:
    """The header text.

    Raises:
        InvalidInput: the kernel's name gives no C name, two parameters, problems or GPU models
            would get the same macro (``bs`` and ``BS``; ``dt=bf16`` and ``dt=BF16``), or an integer
            value has no C constant (beyond 64 bits).
    """
    kernel = macro_name(export.kernel)
    if not C_IDENTIFIER.fullmatch(kernel):
        raise InvalidInput(
            f"cannot export {export.kernel!r} as a C header: its macros need a name that starts with a letter"
        )
    for entry in export.entries:
        for name, value in entry.config.items():
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > C_INTEGER_MAX:
                raise InvalidInput(
                    f"cannot export {export.kernel!r} as a C header: parameter {name!r} is {value} on "
                    f"{entry.gpu_model} for {entry.problem_key!r}, and a C integer constant holds at most "
                    f"{C_INTEGER_MAX} either way (64 bits); the json export keeps it"
                )
    guard = include_guard(export.kernel)
    problems = list(dict.fromkeys(e.problem_key for e in export.entries))
    by_model: dict[str, dict[str, BestEntry]] = {}
    for entry in export.entries:
        by_model.setdefault(entry.gpu_model, {})[entry.problem_key] = entry
    names = _MacroNames(export)
    names.claim(guard, "the include guard")
    targets = {model: names.claim(target_macro(model), f"GPU model {model!r}") for model in by_model}
    macros = names.config_macros(kernel, problems)
    default_key = _default_problem_key(export, problems)
    lines = [
        f"/* Best configs of {comment_text(export.kernel)} (version {export.kernel_version}, "
        f"source {comment_text(export.source_hash[:12])}),",
        f" * exported by kernelfarm on {export.generated_at.isoformat()}. Select a GPU model with",
        f" * -D{TARGET_PREFIX}<MODEL>; without one the default block applies. Generated: do not edit. */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
    ]
    for index, (model, entries) in enumerate(sorted(by_model.items())):
        lines.append(f"{'#if' if index == 0 else '#elif'} defined({targets[model]})")
        own_default = (entries.get(default_key) if default_key else None) or next(iter(entries.values()))
        lines += _block(export, macros, problems, own_default, entries)
    lines.append("#else" if by_model else "#if 1")
    common = _most_common_config(export)
    lines.append("/* default: the config that is best on most recorded GPU models and problems */")
    lines += [f"#define {macros[None, p]} {c_literal(v)}" for p, v in _ordered(export, common)]
    if len(problems) > 1:
        for key in problems:
            lines += [f"#define {macros[key, p]} {c_literal(v)}" for p, v in _ordered(export, common)]
    lines += ["#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def comment_text(text: str) -> str:
    """``text`` as it can stand inside a ``/* */`` comment: printable ASCII as it is, anything else as
    ``ascii()`` spells it (``\\n``, ``\\x00``), ``*/`` and ``/*`` broken by a space. A raw newline or
    ``*/`` would end the comment and make the rest C code; ``/*`` fails ``-Wall -Werror``."""
    printable = "".join(ch if " " <= ch <= "~" else ascii(ch)[1:-1] for ch in text)
    return printable.replace("*/", "* /").replace("/*", "/ *")


class _MacroNames:
    """The names one header defines or tests, each with what it stands for: a second owner of a name
    refuses the export, since the later ``#define`` would replace the other's value (at most a warning)
    or the later ``#elif defined(...)`` block could never be chosen."""

    def __init__(self, export: BestExport) -> None:
        self._export = export
        self._owners: dict[str, str] = {}

    def claim(self, name: str, owner: str) -> str:
        first = self._owners.setdefault(name, owner)
        if first != owner:
            raise InvalidInput(
                f"cannot export {self._export.kernel!r} as a C header: {first} and {owner} would both be "
                f"{name} (C macro names keep letters, digits and _ in upper case); the json export keeps them apart"
            )
        return name

    def config_macros(self, kernel: str, problems: list[str]) -> dict[tuple[str | None, str], str]:
        """(problem key, or None for the unsuffixed macros; parameter) → macro name."""
        parameters = self._export.parameters or list(dict.fromkeys(k for e in self._export.entries for k in e.config))
        macros: dict[tuple[str | None, str], str] = {
            (None, p): self.claim(macro_name(kernel, p), f"parameter {p!r}") for p in parameters
        }
        if len(problems) > 1:
            for key in problems:
                tag = problem_tag(key)
                for p in parameters:
                    macros[key, p] = self.claim(macro_name(kernel, tag, p), f"parameter {p!r} of problem {key!r}")
        return macros


def _block(
    export: BestExport,
    macros: dict[tuple[str | None, str], str],
    problems: list[str],
    own_default: BestEntry,
    entries: dict[str, BestEntry],
) -> list[str]:
    lines = [
        f"/* {comment_text(own_default.gpu_name or own_default.gpu_model)}: "
        f"{own_default.time_ms:.6g} ms for {comment_text(own_default.problem_key)} */"
    ]
    lines += [f"#define {macros[None, p]} {c_literal(v)}" for p, v in _ordered(export, own_default.config)]
    if len(problems) > 1:
        for key in problems:
            entry = entries.get(key, own_default)
            note = f"{entry.time_ms:.6g} ms" if key in entries else "not measured: this GPU model's default"
            lines.append(f"/* {comment_text(key)}: {note} */")
            lines += [f"#define {macros[key, p]} {c_literal(v)}" for p, v in _ordered(export, entry.config)]
    return lines


def _spelled(text: str) -> str:
    return "".join(
        ch
        if ch.isascii() and (ch.isalnum() or ch == "_")
        else f"_X{ch.encode('utf-8', 'surrogatepass').hex().upper()}_"
        for ch in text
    )


def _string_body(text: str) -> str:
    # Printable ASCII stays as it is (the common value reads as before). A raw newline would end the
    # #define and make the rest of the value a directive of its own. A "?" after a "?" is escaped:
    # "??/" is a trigraph for a backslash in ISO C modes (-std=c99) and would escape the closing quote.
    out: list[str] = []
    previous = ""
    for ch in text:
        if ch in NAMED_ESCAPES:
            out.append(NAMED_ESCAPES[ch])
        elif ch == "?" and previous == "?":
            out.append("\\?")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out += (f"\\{byte:03o}" for byte in ch.encode("utf-8", "surrogatepass"))
        previous = ch
    return "".join(out)


def _ordered(export: BestExport, config: dict[str, Any]) -> list[tuple[str, Any]]:
    order = export.parameters or list(config)
    return [(name, config[name]) for name in order if name in config]


def _default_problem_key(export: BestExport, problems: list[str]) -> str | None:
    # The farm's key (it leaves out dimensions at their key default); built here only for older
    # exports that do not carry it.
    wanted = export.default_problem_key or ",".join(
        f"{name}={export.default_problem[name]}" for name in export.problem_params if name in export.default_problem
    )
    return wanted if wanted in problems else (problems[0] if problems else None)


def _most_common_config(export: BestExport) -> dict[str, Any]:
    if not export.entries:
        return {}
    counts = Counter(e.config_key for e in export.entries)
    winner = max(counts, key=lambda k: (counts[k], -[e.config_key for e in export.entries].index(k)))
    return next(e.config for e in export.entries if e.config_key == winner)
