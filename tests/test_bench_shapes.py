"""Shapes of `vkcoop bench sparse` (classes, named MLP shapes, N from 1 to 256, --shapes FILE) and the new
command-line options: no GPU."""
from __future__ import annotations

import json

import pytest

from vkcoop import cli
from vkcoop.bench import shapes
from vkcoop.bench.tuning import TuningCache


def test_classes_named_shapes_and_tokens():
    cases = shapes.make_cases(["fp16", "bf16"], [4096, 8192], ["square", "llm", "mlp"],
                              llm_tokens=[1, 8, 32, 128, 256])
    fp16 = [c for c in cases if c.dtype == "fp16"]
    assert len(cases) == 2 * len(fp16) and len(fp16) == 2 + 10 + 2
    assert {(c.m, c.n, c.k) for c in fp16 if c.shape_class == "mlp"} == {(5120, 13824, 5120), (4096, 11008, 4096)}
    assert sorted({c.n for c in fp16 if c.shape_class == "llm"}) == [1, 8, 32, 128, 256]
    assert all(c.m == c.k for c in fp16 if c.shape_class == "llm")
    assert shapes.make_cases(["fp16"], [4096], ["llm"]) == shapes.make_cases(["fp16"], [4096], ["llm"],
                                                                              shapes.LLM_TOKENS)
    assert 32 in shapes.LLM_TOKENS and min(shapes.LLM_TOKENS) == 1 and max(shapes.LLM_TOKENS) == 256
    twice = shapes.make_cases(["fp16"], [4096, 4096], ["square", "square"])
    assert len(twice) == 1
    with pytest.raises(ValueError, match="--llm-tokens"):
        shapes.make_cases(["fp16"], [4096], ["llm"], llm_tokens=[0])


def test_csv_with_a_header_in_any_order_and_without_one(tmp_path):
    with_header = tmp_path / "mine.csv"
    with_header.write_text("# LLaMA-2 70B\nk,label,m,n\n8192,qkv,10240,16\n28672,down,8192,16\n")
    bare = tmp_path / "bare.csv"
    bare.write_text("4096,11008,4096\n 5120 , 1 , 5120 , gate\n")
    assert [(s.label, s.m, s.n, s.k) for s in shapes.read_shape_file(with_header)] == [
        ("qkv", 10240, 16, 8192), ("down", 8192, 16, 28672)]
    assert [(s.label, s.m, s.n, s.k) for s in shapes.read_shape_file(bare)] == [
        ("user", 4096, 11008, 4096), ("gate", 5120, 1, 5120)]


def test_json_list_or_object(tmp_path):
    listed = tmp_path / "a.json"
    listed.write_text(json.dumps([{"label": "up", "M": 13824, "N": 8, "K": 5120}]))
    wrapped = tmp_path / "b.json"
    wrapped.write_text(json.dumps({"shapes": [{"m": 64, "n": 1, "k": 32}]}))
    assert [(s.label, s.m, s.n, s.k) for s in shapes.read_shape_file(listed)] == [("up", 13824, 8, 5120)]
    assert shapes.read_shape_file(wrapped)[0].label == "user"
    problems = shapes.make_cases(["bf16"], [64], shapes.read_shape_file(listed) + ["square"])
    assert [(p.shape_class, p.m, p.n, p.k) for p in problems] == [("up", 13824, 8, 5120), ("square", 64, 64, 64)]


@pytest.mark.parametrize("name, content, message", [
    ("bad.json", "[{\"m\": 1, \"n\": 1}]", "needs m, n and k"),
    ("bad2.json", "{oops", "not valid JSON"),
    ("k.csv", "64,64,100\n", "K=100 is not a multiple of 32"),
    ("zero.csv", "0,64,64\n", "at least 1"),
    ("word.csv", "a,b,c\n", "whole numbers"),
    ("cols.csv", "1,2\n", r"M,N,K\[,LABEL\]"),
    ("label.csv", "64,64,64,has space\n", "label"),
    ("short.csv", "label,m,n,k\nx,64\n", "columns"),
    ("empty.csv", "# nothing\n", "no shapes"),
])
def test_bad_shape_files_name_the_file_and_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        shapes.read_shape_file(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_parse_shapes_tells_classes_from_files(tmp_path):
    (tmp_path / "s.csv").write_text("64,8,64\n")
    parsed = shapes.parse_shapes(["square", str(tmp_path / "s.csv"), "mlp"])
    assert parsed[0] == "square" and parsed[2] == "mlp" and parsed[1].m == 64
    with pytest.raises(ValueError, match="neither a shape class"):
        shapes.parse_shapes(["cube"])
    with pytest.raises(ValueError, match="cannot read"):
        shapes.parse_shapes([str(tmp_path / "missing.json")])


@pytest.mark.parametrize("args, words", [
    (["--shapes", "cube"], ["--shapes", "neither a shape class"]),
    (["--shapes", "missing.csv"], ["--shapes", "cannot read"]),
    (["--tune-budget", "0"], ["--tune-budget", "positive"]),
    (["--search-budget", "soon"], ["--search-budget", "'soon'"]),
    (["--llm-tokens", "0"], ["--llm-tokens", "at least 1"]),
    (["--baseline", "cuMagic"], ["--baseline", "cuMagic"]),
])
def test_bad_bench_options_are_one_line_usage_errors(capsys, args, words):
    assert cli.main(["bench", "sparse", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(word in err[0] for word in words), err


def test_bench_sparse_help_names_the_new_options(capsys):
    assert cli.main(["bench", "sparse", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--tune", "--retune", "--tune-budget", "--search-budget", "--baseline", "--shapes", "mlp"):
        assert option in out


def test_bench_tuning_shows_the_cache(tmp_path, monkeypatch, capsys):
    from vkcoop.bench.identity import DeviceIdentity

    monkeypatch.setenv("VKCOOP_CACHE_DIR", str(tmp_path))
    assert cli.main(["bench", "tuning"]) == 0
    assert "no tuned configurations" in capsys.readouterr().out
    device = DeviceIdentity("NVIDIA H100 80GB HBM3", "11112222333344445555666677778888", "580.159.4")
    TuningCache().store(device, "vk-coopmat2-dense", "fp16", "compute",
                        {"config": "256:128x256x32u8g8", "median_ms": 1.0, "tflops": 250.0, "problem": "8192x8192x8192"})
    assert cli.main(["bench", "tuning"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100" in out and "256:128x256x32u8g8" in out and "250.0" in out
    assert cli.main(["bench", "tuning", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["class"] == "compute" and rows[0]["driver"] == "580.159.4"
    (tmp_path / "tuning" / f"{device.file_stem}.json").write_text("garbage")
    assert cli.main(["bench", "tuning"]) == 0
    captured = capsys.readouterr()
    assert "rejected" in captured.err and "no tuned configurations" in captured.out
