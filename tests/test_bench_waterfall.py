"""The cost of Vulkan as a waterfall, from synthetic bench results: rungs, ratios, regimes, JSON, chart, CLI."""
from __future__ import annotations

import json

import pytest

from vkcoop import cli
from vkcoop.bench import waterfall
from vkcoop.errors import InputError

SQUARE = (8192, 8192, 8192)
SKINNY = (8192, 32, 8192)


def _row(path, tflops, shape=SQUARE, dtype="fp16", status="ok"):
    m, n, k = shape
    flops = 2.0 * m * n * k
    return {"path": path, "case": f"{dtype} x {m}x{n}x{k}", "dtype": dtype, "shape_class": "x", "m": m, "n": n, "k": k,
            "status": status, "config": f"{path}-config", "tflops": tflops if status == "ok" else None,
            "median_ms": flops / tflops / 1e9 if status == "ok" else None}


def _run(*rows, environment=None):
    return {"environment": environment or {}, "settings": {}, "results": list(rows)}


def _attention(path, tflops, kind="prefill", status="ok"):
    case = f"{kind} fp16 b4 h32 q4096 kv4096 d128"
    return {"path": path, "case": case, "kind": kind, "dtype": "fp16", "causal": False,
            "shape": {"batch": 4, "q_heads": 32, "kv_heads": 32, "seq_q": 4096, "seq_kv": 4096, "head_dim": 128},
            "status": status, "config": "", "tflops": tflops, "median_ms": 1000.0 / tflops}


DENSE = [_row("cuBLAS", 746.0), _row("cuda-mma.sync", 500.0), _row("cuda-mma.sync-cap", 400.0),
         _row("vk-coopmat2-dense", 335.0)]
SPARSE = [_row("cuSPARSELt", 1300.0), _row("cuSPARSELt-nvmath", 1350.0), _row("cuda-wgmma.sp", 1200.0),
          _row("cuda-mma.sp", 733.0), _row("cuda-mma.sp-cap", 500.0), _row("vk-coopmat2-2:4", 230.0),
          _row("vk-coopmat2-2:4-expand", 257.0)]


def test_the_dense_and_2_4_rungs_of_a_compute_bound_case():
    falls = {f.family: f for f in waterfall.waterfalls(_run(*DENSE, *SPARSE))}
    dense, sparse = falls["dense"], falls["2:4"]
    assert dense.regime == sparse.regime == "compute-bound"
    assert [s.path for s in dense.steps] == ["cuBLAS", "cuda-mma.sync", "cuda-mma.sync-cap", "vk-coopmat2-dense"]
    assert [s.ratio for s in dense.steps[1:]] == pytest.approx([500 / 746, 400 / 500, 335 / 400])
    assert [s.what for s in dense.steps] == ["", "the instruction set", "the cap", "the driver's compiler and the API"]
    assert dense.total == pytest.approx(335 / 746)
    # the fastest of each rung's paths stands for it: nvmath's cuSPARSELt on top, the expand path at the bottom
    assert [s.path for s in sparse.steps] == ["cuSPARSELt-nvmath", "cuda-mma.sp", "cuda-mma.sp-cap", "vk-coopmat2-2:4-expand"]
    assert sparse.steps[1].ratio == pytest.approx(733 / 1350) and sparse.total == pytest.approx(257 / 1350)


def test_a_missing_rung_joins_its_cause_to_the_next_step_and_a_failed_row_is_no_rung():
    rows = [_row("cuBLAS", 700.0, SKINNY), _row("cuda-mma.sync", 350.0, SKINNY),
            _row("cuda-mma.sync-cap", 0.0, SKINNY, status="failed"), _row("vk-coopmat2-dense", 280.0, SKINNY)]
    fall, = waterfall.waterfalls(_run(*rows))
    assert fall.regime == "memory-bound" and fall.missing == ["mma.sync at Vulkan's cap"]
    assert fall.steps[-1].what == "the cap + the driver's compiler and the API"
    assert fall.steps[-1].ratio == pytest.approx(280 / 350)


def test_a_case_with_one_rung_has_no_waterfall_and_a_run_without_any_is_refused(tmp_path):
    assert waterfall.waterfalls(_run(_row("cuBLAS", 700.0))) == []
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_run(_row("cuBLAS", 700.0))))
    with pytest.raises(InputError, match="has two rungs"):
        waterfall.load_waterfalls([path])


def test_attention_prefill_and_decode():
    rows = [_attention("torch-cudnn", 460.0), _attention("torch-flash", 300.0), _attention("vk-coopmat2", 240.0),
            _attention("torch-cudnn", 2.0, "decode"), _attention("vk-coopmat2", 2.5, "decode")]
    falls = {f.regime: f for f in waterfall.waterfalls(_run(*rows))}
    assert [s.ratio for s in falls["compute-bound"].steps[1:]] == pytest.approx([300 / 460, 240 / 300])
    decode = falls["memory-bound"]
    assert decode.missing == ["FlashAttention-2 (mma.sync)"] and decode.total == pytest.approx(1.25)


def test_json_chart_and_command(tmp_path, capsys):
    environment = {"vulkan_cap": {"shared_memory": 49152, "reserved": 8192, "shader_share": 40960,
                                  "max_workgroup": 256, "source": "vulkan driver"},
                   "ceilings": {"cuda": {"mma": {"mma.sync": {"fp16->fp32": {"tflops": 646.0}}}}}}
    sparse = tmp_path / "sparse.json"
    sparse.write_text(json.dumps(_run(*DENSE, *SPARSE, environment=environment)))
    attention = tmp_path / "attention.json"
    attention.write_text(json.dumps(_run(_attention("torch-cudnn", 460.0), _attention("vk-coopmat2", 240.0))))
    out_json, out_png = tmp_path / "w" / "waterfall.json", tmp_path / "w" / "waterfall.png"
    assert cli.main(["bench", "waterfall", str(sparse), str(attention), "--json", str(out_json),
                     "--plot", str(out_png)]) == 0
    printed = capsys.readouterr().out
    assert "cuda-mma.sync-cap" in printed and "400.0 0.80x" in printed and "335.0 0.84x" in printed
    assert "49152 bytes" in printed and "40960" in printed
    data = json.loads(out_json.read_text())
    assert {w["family"] for w in data["waterfalls"]} == {"dense", "2:4", "attention"}
    assert data["sources"][0]["ceilings"] == {"cuda mma.sync fp16->fp32": 646.0}
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_file_that_is_not_a_bench_run_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert cli.main(["bench", "waterfall", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]
