"""Bad input to the vkcoop command: each gets its documented exit code and one line ``vkcoop: error: <what>;
<what to do>`` naming the bad thing, and never a traceback. The many cases run through ``cli.main`` in this process
with the file descriptors captured (what the user's terminal would show, the Vulkan loader's own lines included);
what only a process shows runs as one, ``python -m vkcoop`` as a user would: one refusal of each kind (argparse's
and the command's own), the module entry, Ctrl-C and a closed pipe."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import child_env

from vkcoop import cli, vk

REPO = Path(__file__).resolve().parent.parent


def _has_vulkan() -> bool:
    try:
        vk.capabilities()
        return True
    except Exception:  # noqa: BLE001 - no loader or no device
        return False


needs_vulkan = pytest.mark.skipif(not _has_vulkan(), reason="no Vulkan device (lavapipe is enough)")


def vkcoop_process(*argv, env=None):
    """``python -m vkcoop ARGV`` from the checkout, as a user runs it."""
    environment = child_env(drop=("VKCOOP_DEVICE",), **(env or {}))
    return subprocess.run([sys.executable, "-m", "vkcoop", *argv], capture_output=True, text=True,
                          env=environment, cwd=REPO, timeout=300)


@pytest.fixture
def vkcoop(monkeypatch, capfd):
    """``vkcoop ARGV`` through cli.main in this process, from the checkout, with ``env`` set for the call: a
    CompletedProcess of its exit code and what reached file descriptors 1 and 2."""
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("VKCOOP_DEVICE", raising=False)

    def run(*argv, env=None):
        with monkeypatch.context() as scoped:
            for name, value in (env or {}).items():
                scoped.setenv(name, value)
            capfd.readouterr()
            code = cli.main(list(argv))
            out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["vkcoop", *argv], code, out, err)
    return run


def assert_one_line_error(proc, code: int, *names: str):
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr + proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("vkcoop: error:")]
    assert len(errors) == 1, proc.stderr
    assert "; " in errors[0], errors[0]          # <what>; <what to do>
    for name in names:
        assert name in errors[0], (name, errors[0])


#: (arguments, exit code, words the error line must contain): usage errors, caught before anything runs.
USAGE = [
    (["bench", "sparse", "--sizes", "abc"], 2, ["--sizes", "'abc'"]),
    (["bench", "sparse", "--sizes", ""], 2, ["--sizes", "at least one"]),
    (["bench", "sparse", "--sizes", "100"], 2, ["--sizes", "multiple of 64"]),
    (["bench", "sparse", "--llm-tokens", "0"], 2, ["--llm-tokens", "at least 1"]),
    (["bench", "sparse", "--llm-tokens", "-7"], 2, ["--llm-tokens", "-7"]),
    (["bench", "sparse", "--dtype", "fp8"], 2, ["--dtype", "fp8"]),
    (["bench", "sparse", "--paths", "cuda-magic"], 2, ["--paths", "cuda-magic"]),
    (["bench", "sparse", "--iters", "0"], 2, ["--iters"]),
    (["fuzz", "--cases", "-3"], 2, ["--cases"]),
    (["fuzz", "--target", "gpu"], 2, ["--target", "gpu"]),
    (["run"], 2, ["--all"]),
    (["run", "no-such-sample"], 2, ["no-such-sample"]),
    (["shaders", "dis", "load_store", "-D", "NOEQUALS"], 2, ["NOEQUALS"]),
    (["shaders", "list", "load_store", "-D", "ELEMENT=F64"], 2, ["ELEMENT=F64", "vkcoop shaders list PATTERN"]),
    (["frobnicate"], 2, ["frobnicate"]),
    (["run", "--all", "--validate=gpu-av"], 2, ["--validate", "gpu-av"]),
    (["sanitize"], 2, ["TARGET"]),
    (["sanitize", "cuda", "--tools", "leakcheck"], 2, ["--tools", "leakcheck"]),
    (["sanitize", "cuda", "--kernels", "("], 2, ["--kernels", "regular expression"]),
    (["sanitize", "cuda", "--kernels", "no_such_kernel"], 2, ["--kernels", "matches none"]),
    (["sanitize", "cuda", "--timeout", "0"], 2, ["--timeout"]),
    (["sanitize", "vulkan", "--parts", "shaders"], 2, ["--parts", "shaders"]),
    (["sanitize", "vulkan", "--dtype", "fp8"], 2, ["--dtype", "fp8"]),
]


@pytest.mark.parametrize("argv, code, names", USAGE, ids=[" ".join(a) or "-" for a, _, _ in USAGE])
def test_usage_errors_are_one_line(vkcoop, argv, code, names):
    assert_one_line_error(vkcoop(*argv), code, *names)


#: argparse's own refusals: (arguments, words the line must contain, the command whose --help it points at).
PARSER_ERRORS = [
    (["frobnicate"], ["unknown command 'frobnicate'", "explain, inspect"], "vkcoop"),
    (["bench", "bogus"], ["unknown command 'bogus'", "vkcoop bench has sparse"], "vkcoop bench"),
    (["explain", "--no-such-option"], ["unrecognized arguments: --no-such-option"], "vkcoop explain"),
    (["bench", "sparse", "--no-such-option"], ["unrecognized arguments: --no-such-option"], "vkcoop bench sparse"),
    (["sanitize"], ["required: TARGET"], "vkcoop sanitize"),
]


@pytest.mark.parametrize("argv, words, command", PARSER_ERRORS, ids=[" ".join(a) for a, _, _ in PARSER_ERRORS])
def test_parser_errors_say_vkcoop_once_and_point_at_the_command_s_help(vkcoop, argv, words, command):
    proc = vkcoop(*argv)
    assert_one_line_error(proc, 2, *words, f"; see `{command} --help`")
    line = proc.stderr.strip()
    assert line.count("vkcoop:") == 1 and not line.startswith("vkcoop: error: vkcoop"), line


#: One refusal of each kind as a process: argparse's (it leaves main through SystemExit) and the command's own.
AS_PROCESS = [(["frobnicate"], ["unknown command 'frobnicate'", "; see `vkcoop --help`"]),
              (["bench", "sparse", "--sizes", "100"], ["--sizes", "multiple of 64"])]


@pytest.mark.parametrize("argv, words", AS_PROCESS, ids=[" ".join(a) for a, _ in AS_PROCESS])
def test_a_refusal_as_a_process_exits_2_with_one_line_and_no_traceback(argv, words):
    assert_one_line_error(vkcoop_process(*argv), 2, *words)


@pytest.fixture
def no_toolchain_found():
    """The toolchain search runs again for the test (this process cached what it found) and after it."""
    from spirv_tools import compiler, toolchain
    for cached in (toolchain.find_toolchain, compiler.backend):
        cached.cache_clear()
    yield
    for cached in (toolchain.find_toolchain, compiler.backend):
        cached.cache_clear()


def test_no_toolchain_is_an_environment_error(vkcoop, no_toolchain_found, tmp_path):
    env = {"VKCOOP_TOOLCHAIN_DIR": str(tmp_path / "none"), "PATH": "/usr/bin:/bin", "VULKAN_SDK": ""}
    for argv in (["shaders", "check"], ["demo"], ["fuzz", "--target", "portable", "--cases", "10"]):
        assert_one_line_error(vkcoop(*argv, env=env), 3, "toolchain", "vkcoop toolchain install")
    listed = vkcoop("shaders", "list", "tensor/load_store", env=env)   # listing compiles nothing
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 30, listed.stderr


@pytest.mark.toolchain
def test_reflect_needs_one_variant_and_lists_them(vkcoop):
    assert_one_line_error(vkcoop("shaders", "reflect", "tensor/load_store"), 2, "variants match", "-D")
    listed = vkcoop("shaders", "list", "tensor/load_store", "--json")
    variants = json.loads(listed.stdout)
    assert listed.returncode == 0 and len(variants) == 30
    chosen = variants[7]["defines"]
    flags = [arg for name, value in chosen.items() for arg in ("-D", f"{name}={value}")]
    picked = vkcoop("shaders", "reflect", "tensor/load_store", *flags, "--json")
    assert picked.returncode == 0, picked.stderr
    assert "TensorAddressingNV" in json.loads(picked.stdout)["capabilities"]


@pytest.mark.toolchain
def test_broken_shader_and_dangling_link(vkcoop, tmp_path):
    root = tmp_path / "shaders"
    (root / "include").mkdir(parents=True)
    (root / "broken.comp").write_text("#version 450\nvoid main() { this is not glsl; }\n")
    (root / "gone.comp").symlink_to(root / "missing.comp")
    env = {"VKCOOP_SHADER_DIR": str(root)}
    assert_one_line_error(vkcoop("shaders", "dis", "broken", env=env), 1, "broken.comp")
    checked = vkcoop("shaders", "check", env=env)
    assert checked.returncode == 1 and "Traceback" not in checked.stderr + checked.stdout
    assert "broken.comp" in checked.stdout and "gone.comp" not in checked.stdout


@needs_vulkan
@pytest.mark.vulkan
@pytest.mark.parametrize("argv", [["run", "--all", "--device", "7"], ["info", "--device", "7"],
                                  ["bench", "sparse", "--device", "7"], ["fuzz", "--device", "7"]])
def test_a_device_that_does_not_exist_is_refused_before_anything_runs(vkcoop, argv):
    assert_one_line_error(vkcoop(*argv), 3, "index 7")


@needs_vulkan
@pytest.mark.vulkan
def test_the_device_variable_is_checked_too(vkcoop):
    assert_one_line_error(vkcoop("run", "--all", env={"VKCOOP_DEVICE": "7"}), 3, "$VKCOOP_DEVICE", "index 7")


@needs_vulkan
@pytest.mark.vulkan
def test_json_to_a_directory_fails_before_the_run_and_folders_are_created(vkcoop, tmp_path):
    assert_one_line_error(vkcoop("run", "--all", "--json", str(tmp_path)), 2, "is a directory")
    target = tmp_path / "new" / "folder" / "r.json"
    made = vkcoop("run", "tensor-views", "--json", str(target))
    from test_fuzz_hw import _coopmat2_device
    ran = bool(_coopmat2_device())   # without coopmat2 the sample skips: the JSON says so, and nothing ran (exit 3)
    assert made.returncode == (0 if ran else 3), made.stderr
    assert target.is_file() and f"wrote {target}" in made.stderr.replace("\n", "")


@needs_vulkan
@pytest.mark.vulkan
def test_info_all_and_a_closed_pipe(vkcoop):
    listed = vkcoop("info", "--all")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    piped = subprocess.run(f"{sys.executable} -m vkcoop info --all --json | head -c 100", shell=True,
                           capture_output=True, text=True, cwd=REPO, env=child_env())
    assert len(piped.stdout) == 100 and piped.stderr == ""


@needs_vulkan
@pytest.mark.vulkan
def test_nothing_can_run_so_no_rate_and_no_plot(vkcoop, tmp_path):
    from test_fuzz_hw import _coopmat2_device
    if _coopmat2_device():
        pytest.skip("this machine has a coopmat2 device: the hardware target and the Vulkan path can run")
    proc = vkcoop("fuzz", "--target", "hw", "--cases", "100")
    assert_one_line_error(proc, 3, "no fuzz target could run here")
    assert "cases/s" not in proc.stdout
    plot = tmp_path / "bench.png"
    bench = vkcoop("bench", "sparse", "--sizes", "64", "--shapes", "llm", "--dtype", "fp16", "--paths",
                   "vk-coopmat2-dense", "--plot", str(plot))
    assert_one_line_error(bench, 3, "no path could run here")
    assert not plot.exists()


def test_version_and_module_entry(vkcoop):
    from vkcoop import __version__
    proc = vkcoop_process("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"vkcoop {__version__}"
    helped = vkcoop("--help")
    assert helped.returncode == 0 and "exit codes:" in helped.stdout and "130" in helped.stdout


def _interrupted_fuzz_run(report):
    """A 5,000,000-case fuzz run sent SIGINT once its piped progress says a chunk of cases finished: (return code,
    stdout, stderr, the progress line it was interrupted after)."""
    import queue
    import signal
    import threading

    environment = child_env(drop=("VKCOOP_DEVICE",), PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    # A shell without job control starts background jobs with SIGINT ignored, and children inherit that (a CI
    # runner did). Python then never raises KeyboardInterrupt, so the child gets the default disposition back.
    proc = subprocess.Popen([sys.executable, "-m", "vkcoop", "fuzz", "--target", "portable", "--cases", "5000000",
                             "--workers", "0", "--no-shrink", "--progress", "lines", "--json", str(report)],
                            cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines, err_lines, out_parts = queue.Queue(), [], []

    def read_stderr():
        for line in proc.stderr:
            err_lines.append(line)
            lines.put(line)
        lines.put(None)

    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: out_parts.append(proc.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        first = None
        while first is None:
            line = lines.get(timeout=120)
            assert line is not None, f"the fuzz run ended before its first progress line: {''.join(err_lines)}"
            first = line if line.startswith("[") and "mismatches" in line else None
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)   # faulthandler prints where every thread is
            readers[0].join(timeout=30)
            pytest.fail("the fuzz run did not stop within 120 s of SIGINT; its stderr:\n"
                        + "".join(err_lines)[-6000:])
        for reader in readers:
            reader.join(timeout=30)
    finally:
        proc.kill()   # never leave a 5,000,000-case run behind a failed assertion
    out = "".join(out_parts)
    return proc.returncode, out, "".join(err_lines), first


@needs_vulkan
@pytest.mark.vulkan
@pytest.mark.toolchain
def test_ctrl_c_stops_a_long_fuzz_run_with_a_partial_summary(tmp_path):
    report = tmp_path / "fuzz.json"
    returncode, out, err, first = _interrupted_fuzz_run(report)
    assert returncode == 130, err[-2000:]
    assert "Traceback" not in out + err
    assert "interrupted" in out
    data = json.loads(report.read_text())
    done = int(first[1:first.index("/")])
    assert data["interrupted"] and done <= data["cases"] < 5000000, (first, data["cases"])


def test_a_bad_json_path_fails_before_the_fuzz_runs(vkcoop, tmp_path):
    assert_one_line_error(vkcoop("fuzz", "--cases", "10", "--json", str(tmp_path)), 2, "is a directory")


def test_every_option_of_every_command_has_help():
    """`vkcoop COMMAND --help` explains each option (defaults are added by the formatter)."""
    import argparse

    from vkcoop import cli

    def parsers(parser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    yield from parsers(child)

    silent = [f"{parser.prog} {'/'.join(action.option_strings)}" for parser in parsers(cli.build_parser())
              for action in parser._actions if action.option_strings and not action.help]
    assert silent == []


def test_a_second_setup_run_does_no_work():
    """scripts/setup.sh after a completed setup (CI has just run it): one line, no reinstall, no warnings."""
    import time

    started = time.perf_counter()
    proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, capture_output=True, text=True, timeout=600)
    if proc.returncode == 0 and "installing" in proc.stdout + proc.stderr:
        # A checkout whose pyproject changed since the last setup reinstalls once; the run after must not.
        started = time.perf_counter()
        proc = subprocess.run(["bash", "scripts/setup.sh"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    output = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(output) == 1 and output[0].startswith("setup: ready"), output
    assert time.perf_counter() - started < 30


@pytest.mark.parametrize("argv", [["bench", "peak", "--no-cuda"], ["bench", "attention"],
                                  ["inspect", "--shader", "test/increment.comp"], ["sanitize", "vulkan"],
                                  ["sanitize", "cuda"]])
def test_every_json_output_refuses_a_directory_before_any_work(vkcoop, argv, tmp_path):
    proc = vkcoop(*argv, "--json", str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("vkcoop: error:")]
    assert len(errors) == 1 and f"--json {tmp_path}: is a directory" in errors[0], proc.stderr
    assert proc.stdout == ""   # nothing was measured or printed before the refusal


def test_output_files_get_their_folder_and_a_folder_is_no_file(tmp_path):
    from vkcoop import InputError
    from vkcoop.paths import output_file
    assert output_file(None) is None and output_file("-") is None
    target = tmp_path / "a" / "b" / "r.json"
    assert output_file(str(target)) == target and target.parent.is_dir()
    with pytest.raises(InputError, match="--plot .*: is a directory; give a file name"):
        output_file(str(tmp_path), "--plot")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(InputError, match="cannot create its folder .*; choose a writable place"):
        output_file(str(blocker / "r.json"))
