"""What ``vkcoop inspect`` builds: a shader variant with specialization constants, a sample's cases, the
pipelines one Vulkan path of ``vkcoop bench sparse`` creates, or those of one flash-attention configuration on one
case of ``vkcoop bench attention``. Everything here is checked on the host, before
any device work, and travels to the child process as a JSON-able dict."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .. import shaders as catalog

#: The Vulkan paths of ``vkcoop bench sparse`` and short names for them.
GEMM_PATHS = {"dense": "vk-coopmat2-dense", "dense16": "vk-coopmat2-dense-fp16acc", "2:4": "vk-coopmat2-2:4",
              "sparse24": "vk-coopmat2-2:4", "khr": "vk-khr-subgroup",
              "2:4-expand": "vk-coopmat2-2:4-expand"}
GEMM_DTYPES = ("fp16", "bf16")
GEMM_SHAPES = ("square", "llm")
_NAME = re.compile(r"^[A-Za-z_]\w*$")
#: A KHR tile's label as bench sparse prints it (vkcoop.gemm.tiles.SubgroupTile.label); its code is SUBGROUP_CODE.
_KHR_LABEL = re.compile(r"\d+x\d+x\d+ of \d+x\d+x\d+ \(\d+x\d+ subgroups(?:, \d+ stages)?(?:, groups of \d+ rows)?\)")


class TargetError(ValueError):
    """The target names something that does not exist or cannot be built (exit 2)."""


@dataclass
class Target:
    kind: str                                        # "shader" | "sample" | "gemm" | "attention"
    shader: str = ""
    defines: dict = field(default_factory=dict)
    specialization: dict = field(default_factory=dict)   # constant_id (int) or name -> value
    features: list = field(default_factory=list)         # extra vkcoop feature names (shader targets)
    subgroup_size: int | None = None
    sample: str = ""
    case: str | None = None
    gemm_path: str = ""
    dtype: str = "fp16"
    shape: str = "square"
    config: int | str = 0                                # gemm: tuning-list index or configuration label
    attention: dict = field(default_factory=dict)        # attention_target's case and configuration

    @property
    def label(self) -> str:
        if self.kind == "shader":
            spec = ", ".join(f"{k}={v}" for k, v in self.specialization.items())
            return catalog.ShaderVariant(self.shader, tuple(sorted(self.defines.items()))).label + \
                (f" {{{spec}}}" if spec else "")
        if self.kind == "sample":
            return f"sample {self.sample}" + (f" case {self.case}" if self.case else "")
        if self.kind == "attention":
            return f"attention {self.attention['case']} {self.attention['config']}"
        return f"{self.gemm_path} {self.dtype} {self.shape} config {self.config}"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["specialization"] = [[k, v] for k, v in self.specialization.items()]  # keeps int keys through JSON
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Target":
        data = dict(data)
        data["specialization"] = {k: v for k, v in data.get("specialization", [])}
        return cls(**data)


def parse_value(text: str):
    """A specialization value from the command line: true/false, an int (0x.. allowed) or a float."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(lowered, 0)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        raise TargetError(f"specialization value {text!r} is not true/false, an integer or a number") from None


def _pairs(items, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TargetError(f"{what} {item!r}: write NAME=VALUE")
        pairs.append((key.strip(), value.strip()))
    return pairs


def shader_target(shader: str, defines=(), specialization=(), features=(), subgroup_size: int | None = None) -> Target:
    """A shader under shaders/ with one declared ``@variants`` combination (``defines``: "NAME=VALUE" strings;
    none needed when the shader declares a single variant) and ``specialization``: "ID=VALUE" or
    "NAME=VALUE" strings."""
    known = catalog.shader_files()
    if shader not in known:
        close = [s for s in known if shader in s]
        hint = f" (did you mean {', '.join(close[:4])}?)" if close else ""
        raise TargetError(f"no shader {shader!r} under shaders/{hint}")
    chosen = dict(_pairs(defines, "--define"))
    variants = catalog.declared_variants(shader)
    wanted = tuple(sorted(chosen.items()))
    if wanted not in {v.defines for v in variants}:
        if chosen or len(variants) != 1:
            listed = "; ".join(" ".join(f"-D {k}={v}" for k, v in var.defines) for var in variants[:6])
            raise TargetError(f"{shader}: the defines {chosen or '{}'} are not a declared @variants combination; "
                              f"declared: {listed}{' ...' if len(variants) > 6 else ''}")
    spec = {}
    for key, value in _pairs(specialization, "--spec"):
        if key.isdigit():
            key = int(key)
        elif not _NAME.match(key):
            raise TargetError(f"--spec {key}=...: the key is a constant_id or a constant's name")
        spec[key] = parse_value(value)
    if subgroup_size is not None and (subgroup_size <= 0 or subgroup_size & (subgroup_size - 1)):
        raise TargetError(f"--subgroup-size {subgroup_size} is not a power of two")
    from ..vk import features as feature_registry
    for name in features or ():
        if name not in feature_registry.FEATURE_TO_STRUCT:
            raise TargetError(f"--feature {name!r} is not a Vulkan feature name vkcoop knows")
    return Target("shader", shader=shader, defines=dict(wanted), specialization=spec, features=list(features or ()),
                  subgroup_size=subgroup_size)


def sample_target(name: str, case: str | None = None) -> Target:
    from ..samples import all_samples
    names = [s.name for s in all_samples()]
    if name not in names:
        raise TargetError(f"no sample {name!r}; samples: {', '.join(names)}")
    return Target("sample", sample=name, case=case)


def gemm_target(path: str, dtype: str = "fp16", shape: str = "square", config: int | str = 0) -> Target:
    """The pipelines ``vkcoop bench sparse`` builds for one Vulkan path, dtype and shape class; ``config`` indexes
    the path's tuning list (0 = the configuration the bench uses without ``--tune``) or is a configuration label
    (``vkcoop.gemm.paths.VulkanConfig``, as the explore tool and the tuning cache write them)."""
    full = GEMM_PATHS.get(path, path)
    if full not in GEMM_PATHS.values():
        names = sorted(set(GEMM_PATHS) | set(GEMM_PATHS.values()))
        raise TargetError(f"--gemm {path!r}: choose from {', '.join(names)}")
    if dtype not in GEMM_DTYPES:
        raise TargetError(f"--dtype {dtype!r}: choose from {', '.join(GEMM_DTYPES)}")
    if full == GEMM_PATHS["dense16"] and dtype != "fp16":
        raise TargetError(f"--gemm {path}: accumulates in fp16, so --dtype must be fp16 (not {dtype})")
    if shape not in GEMM_SHAPES:
        raise TargetError(f"--shape {shape!r}: choose from {', '.join(GEMM_SHAPES)}")
    if full == GEMM_PATHS["2:4-expand"] and shape != "square":
        raise TargetError(f"--gemm {path}: runs compute-bound shapes only, so --shape must be square (not {shape})")
    if isinstance(config, str) and config.lstrip("-").isdigit():
        config = int(config)
    if isinstance(config, int) and config < 0:
        raise TargetError(f"--config {config}: an index into the path's tuning list, 0 or more")
    khr = full == GEMM_PATHS["khr"]
    if isinstance(config, str) and khr and not (_khr_code(config) or _KHR_LABEL.fullmatch(config)):
        raise TargetError(f"--config {config!r}: the KHR path takes a tile code MxNxK:SMxSN[dSTAGES][gGROUP_M] "
                          "(e.g. 128x128x32:2x2d2g8) or the label bench sparse prints for one")
    if isinstance(config, str) and not khr:   # KHR: SubgroupTile codes
        from ..gemm import GemmInputError
        from ..gemm.configs import parse_config
        try:
            config = parse_config(config).label()
        except GemmInputError as error:
            raise TargetError(f"--config: {error}") from None
    return Target("gemm", gemm_path=full, dtype=dtype, shape=shape, config=config)


def _khr_code(text: str) -> bool:
    from ..gemm.tiles import SUBGROUP_CODE
    return SUBGROUP_CODE.fullmatch(text) is not None


def attention_target(case: str, dtype: str, shape: dict, causal: bool, config: str,
                     target_workgroups: int | None = None) -> Target:
    """The pipelines one flash-attention configuration (an :class:`vkcoop.attention.AttentionConfig` label)
    needs on one case: ``shape`` holds :class:`vkcoop.attention.AttentionShape`'s fields, ``case`` names it; the
    key splits and GQA rows the label leaves open are chosen as ``bench attention`` chooses them
    (:func:`vkcoop.attention.vulkan.config_options`)."""
    from ..attention import AttentionInputError, AttentionShape, parse_attention_config
    from ..attention.shapes import check_dtype
    try:
        check_dtype(dtype)
        AttentionShape(**shape)
        label = parse_attention_config(config).label()
    except (AttentionInputError, TypeError) as error:
        raise TargetError(str(error)) from None
    if target_workgroups is not None and target_workgroups < 1:
        raise TargetError(f"--target-workgroups {target_workgroups}: 1 or more")
    return Target("attention", dtype=dtype, attention={"case": case, "shape": dict(shape), "causal": bool(causal),
                                                      "config": label, "target_workgroups": target_workgroups})
