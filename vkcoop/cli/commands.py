"""The table of ``vkcoop`` commands, apart from the command modules so that listing them loads none."""

#: The commands, in the order `vkcoop --help` lists them: the module (of this package) whose function adds each
#: one's parser, and its one-line help. Only the module of the command asked for loads, so that the command list, a
#: usage error or one command's --help answers without the others' numpy, Vulkan or CUDA paths below them.
COMMANDS = {
    "toolchain": (".toolchain", "add_toolchain_parser", "show (or install) the coopmat2-capable shader toolchain"),
    "shaders": (".toolchain", "add_shaders_parser",
                "list, build, check (compile + validate), disassemble or reflect shaders"),
    "info": (".device", "add_device_parsers",
             "the Vulkan device(s): coopmat extensions, coopmat2 features and properties"),
    "list": (".device", "add_device_parsers", "the samples and what each needs"),
    "run": (".device", "add_device_parsers", "dispatch samples and check them against the Python reference"),
    "bench": (".bench", "add_bench_parser", "benchmarks: `vkcoop bench sparse --help`"),
    "fuzz": (".bench", "add_fuzz_parser", "differential fuzzing of tensor addressing against the reference"),
    "demo": (".demo", "add_demo_parser", "compile every shader, then dispatch what this machine's Vulkan can run"),
    "sanitize": (".sanitize", "add_sanitize_parser",
                 "run what ships under GPU-AV (vulkan) or compute-sanitizer (cuda)"),
    "explain": (".explain", "add_command", "see what a tensor layout and view do to each matrix cell"),
    "inspect": (".inspect", "add_command", "the machine code the NVIDIA driver built for a pipeline of ours"),
}


def command_help(name: str) -> str:
    """The one-line help of a command (:data:`COMMANDS`), for the function that adds its parser."""
    return COMMANDS[name][2]
