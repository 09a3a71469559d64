"""In-process GLSL -> SPIR-V through libshaderc, bound with cffi in ABI mode.

Only the handful of entry points vkcoop needs are declared (from shaderc/shaderc.h). Includes are
resolved by a Python callback with the same rules glslc uses: ``#include "x"`` relative to the
including file first, then the include directories; ``#include <x>`` the include directories only.
"""
from __future__ import annotations

from pathlib import Path

import cffi

_CDEF = """
typedef struct shaderc_compiler* shaderc_compiler_t;
typedef struct shaderc_compile_options* shaderc_compile_options_t;
typedef struct shaderc_compilation_result* shaderc_compilation_result_t;

typedef struct shaderc_include_result {
    const char* source_name;
    size_t source_name_length;
    const char* content;
    size_t content_length;
    void* user_data;
} shaderc_include_result;

typedef shaderc_include_result* (*shaderc_include_resolve_fn)(
    void* user_data, const char* requested_source, int type,
    const char* requesting_source, size_t include_depth);
typedef void (*shaderc_include_result_release_fn)(void* user_data, shaderc_include_result* include_result);

shaderc_compiler_t shaderc_compiler_initialize(void);
void shaderc_compiler_release(shaderc_compiler_t);
shaderc_compile_options_t shaderc_compile_options_initialize(void);
void shaderc_compile_options_release(shaderc_compile_options_t options);
void shaderc_compile_options_add_macro_definition(shaderc_compile_options_t options, const char* name,
    size_t name_length, const char* value, size_t value_length);
void shaderc_compile_options_set_target_env(shaderc_compile_options_t options, int target, uint32_t version);
void shaderc_compile_options_set_target_spirv(shaderc_compile_options_t options, int version);
void shaderc_compile_options_set_auto_bind_uniforms(shaderc_compile_options_t options, bool auto_bind);
void shaderc_compile_options_set_include_callbacks(shaderc_compile_options_t options,
    shaderc_include_resolve_fn resolver, shaderc_include_result_release_fn result_releaser, void* user_data);
shaderc_compilation_result_t shaderc_compile_into_spv(const shaderc_compiler_t compiler,
    const char* source_text, size_t source_text_size, int shader_kind, const char* input_file_name,
    const char* entry_point_name, const shaderc_compile_options_t additional_options);
void shaderc_result_release(shaderc_compilation_result_t result);
size_t shaderc_result_get_length(const shaderc_compilation_result_t result);
size_t shaderc_result_get_num_errors(const shaderc_compilation_result_t result);
int shaderc_result_get_compilation_status(const shaderc_compilation_result_t);
const char* shaderc_result_get_bytes(const shaderc_compilation_result_t result);
const char* shaderc_result_get_error_message(const shaderc_compilation_result_t result);
void shaderc_get_spv_version(unsigned int* version, unsigned int* revision);
"""

# shaderc_shader_kind / shaderc_target_env / shaderc_env_version / shaderc_spirv_version values.
SHADER_KINDS = {"vert": 0, "frag": 1, "comp": 2, "compute": 2}  # shaderc_shader_kind
TARGET_ENVS = {  # name -> (shaderc_target_env_vulkan, env version, default SPIR-V version)
    "vulkan1.0": (0, 1 << 22, 0x010000),
    "vulkan1.1": (0, (1 << 22) | (1 << 12), 0x010300),
    "vulkan1.2": (0, (1 << 22) | (2 << 12), 0x010500),
    "vulkan1.3": (0, (1 << 22) | (3 << 12), 0x010600),
    "vulkan1.4": (0, (1 << 22) | (4 << 12), 0x010600),
}
STATUS_SUCCESS = 0
_INCLUDE_RELATIVE = 1


class ShadercLibrary:
    """One loaded libshaderc and a compiler handle."""

    def __init__(self, path: str | Path):
        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF)
        self.path = str(path)
        self.lib = self.ffi.dlopen(self.path)  # raises OSError when it can't load (e.g. newer glibc)
        self._compiler = self.lib.shaderc_compiler_initialize()
        if self._compiler == self.ffi.NULL:
            raise OSError(f"shaderc_compiler_initialize failed in {self.path}")

    def close(self):
        if self._compiler is not None:
            self.lib.shaderc_compiler_release(self._compiler)
            self._compiler = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def compile(self, source: str, *, name: str, stage: str = "comp", entry: str = "main",
                defines: dict[str, str] | None = None, target_env: str = "vulkan1.3",
                include_dirs=(), assign_missing_bindings: bool = False) -> tuple[bool, bytes, str]:
        """Returns (ok, spirv, messages). ``assign_missing_bindings``: shaderc's auto-bind-uniforms (glslc's
        ``-fauto-bind-uniforms``), a binding for every resource the source leaves without one."""
        ffi, lib = self.ffi, self.lib
        env, env_version, spirv_version = TARGET_ENVS[target_env]
        opts = lib.shaderc_compile_options_initialize()
        keepalive = []  # cffi buffers the driver-side include results point into
        try:
            for key, value in (defines or {}).items():
                k, v = key.encode(), str(value).encode()
                lib.shaderc_compile_options_add_macro_definition(opts, k, len(k), v, len(v))
            lib.shaderc_compile_options_set_target_env(opts, env, env_version)
            lib.shaderc_compile_options_set_target_spirv(opts, spirv_version)
            lib.shaderc_compile_options_set_auto_bind_uniforms(opts, bool(assign_missing_bindings))

            @ffi.callback("shaderc_include_resolve_fn")
            def resolve(user_data, requested, kind, requesting, depth):
                req, origin = ffi.string(requested).decode(), ffi.string(requesting).decode()
                found = resolve_include(req, origin, kind == _INCLUDE_RELATIVE, include_dirs)
                if found is None:
                    name_bytes, content = b"", f"cannot find include file {req!r}".encode()
                else:
                    name_bytes, content = str(found).encode(), found.read_bytes()
                result = ffi.new("shaderc_include_result*")
                name_buf, content_buf = ffi.new("char[]", name_bytes), ffi.new("char[]", content)
                keepalive.extend((result, name_buf, content_buf))
                result.source_name, result.source_name_length = name_buf, len(name_bytes)
                result.content, result.content_length = content_buf, len(content)
                return result

            @ffi.callback("shaderc_include_result_release_fn")
            def release(user_data, result):
                pass  # freed with keepalive after compilation

            lib.shaderc_compile_options_set_include_callbacks(opts, resolve, release, ffi.NULL)
            src = source.encode()
            res = lib.shaderc_compile_into_spv(self._compiler, src, len(src), SHADER_KINDS[stage],
                                               name.encode(), entry.encode(), opts)
            try:
                status = lib.shaderc_result_get_compilation_status(res)
                messages = ffi.string(lib.shaderc_result_get_error_message(res)).decode(errors="replace")
                if status != STATUS_SUCCESS:
                    return False, b"", messages
                length = lib.shaderc_result_get_length(res)
                return True, bytes(ffi.buffer(lib.shaderc_result_get_bytes(res), length)), messages
            finally:
                lib.shaderc_result_release(res)
        finally:
            lib.shaderc_compile_options_release(opts)


def resolve_include(requested: str, requesting: str, relative: bool, include_dirs) -> Path | None:
    """glslc's include search: the includer's directory first for "x", then every include dir."""
    search = [Path(requesting).parent] if relative and requesting else []
    search += [Path(d) for d in include_dirs]
    for directory in search:
        candidate = directory / requested
        if candidate.is_file():
            return candidate.resolve()
    return None
