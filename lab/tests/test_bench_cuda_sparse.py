"""lab/bench_cuda_sparse.py: argument checks and its behaviour without a usable GPU."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import child_env

from lab import bench_cuda_sparse
from vkcoop.cuda import available

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    # As the lab's tools run: from the repository root, vkcoop and lab from the checkout, installed or not.
    return subprocess.run([sys.executable, "-m", "lab.bench_cuda_sparse", *args], capture_output=True, text=True,
                          timeout=120, env=child_env(), cwd=REPO)


def _refusal(capsys, *args) -> str:
    """What main(ARGS) writes to stderr as it refuses them (argparse's exit 2, before any GPU work)."""
    with pytest.raises(SystemExit) as exit_:
        bench_cuda_sparse.main(list(args))
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_unknown_shape_and_dtype_are_rejected(capsys):
    assert "unknown shape 'cube'" in _refusal(capsys, "--shapes", "cube")
    assert "unknown dtype 'fp8'" in _refusal(capsys, "--dtype", "fp8")


def test_explicit_shapes_are_read_and_malformed_ones_rejected(capsys):
    assert bench_cuda_sparse.shape_of("4096x32x4096") == (4096, 32, 4096)
    assert bench_cuda_sparse.shape_of("llm") == (14336, 16, 4096)
    for bad in ("4096x32", "4096x0x4096", "4096x-32x4096", "axbxc", "4096x32x4096x1"):
        assert bench_cuda_sparse.shape_of(bad) is None, bad
    assert "unknown shape '4096x32'" in _refusal(capsys, "--shapes", "8192x32x8192,4096x32")


def test_unknown_kernel_config_is_rejected_by_name(capsys):
    assert "unknown config(s) 9x9" in _refusal(capsys, "--configs", "auto,256x128k128p,9x9")


def test_configs_name_diagnostic_entries_by_kernel_name_and_each_path_takes_its_own():
    from vkcoop.cuda import WgmmaSpGemm
    diagnostic = bench_cuda_sparse.diagnostic_configs()
    assert set(diagnostic.values()) == set(WgmmaSpGemm.DIAGNOSTIC_CONFIGS)
    name = next(iter(diagnostic))
    labels = [label for label, _ in bench_cuda_sparse._paths(False, {"mma", "wgmma"},
                                                              ["auto", "128x16cs", name, "256x128k128p"])]
    assert labels == ["mma.sp[auto]", "mma.sp[256x128k128p]", "wgmma.sp[auto]", "wgmma.sp[128x16cs]",
                      f"wgmma.sp[{name}]"]


@pytest.mark.skipif(available()[0], reason="a usable CUDA GPU is present")
def test_without_cuda_it_says_why_and_exits_2():
    proc = _run("--shapes", "llm", "--dtype", "fp16")
    assert proc.returncode == 2
    assert "CUDA paths unavailable" in proc.stderr and available()[1] in proc.stderr


def test_every_wgmma_type_is_a_dtype_and_draws_exact_values():
    import ml_dtypes
    rng = np.random.default_rng(0)
    expected = {"tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
                "int8": np.int8, "uint8": np.uint8}
    for name, np_dtype in expected.items():
        values = bench_cuda_sparse.draw(rng, (64, 256), bench_cuda_sparse.DTYPES[name])
        assert values.dtype == np_dtype, name
        wide = set(np.unique(values.astype(np.float64)).tolist())
        assert wide == ({0, 1, 2, 3, 4} if name == "uint8" else {-2, -1, 0, 1, 2} if name == "int8"
                        else {-1.0, -0.5, 0.0, 0.5, 1.0}), name


@pytest.mark.skipif(available()[0], reason="a usable CUDA GPU is present")
def test_the_wgmma_types_pass_the_argument_checks():
    proc = _run("--paths", "wgmma,cusparselt", "--dtype", "tf32,e4m3,e5m2,int8,uint8", "--shapes", "8192x8192x8192")
    assert proc.returncode == 2 and "CUDA paths unavailable" in proc.stderr and "unknown" not in proc.stderr
