"""Copies the top-level shaders/ tree into the wheel as vkcoop/_shaders.

The repository keeps shaders beside the packages (the project's layout); an installed
vkcoop finds them inside its own package directory instead (see vkcoop.paths).
"""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithShaders(build_py):
    def run(self):
        super().run()
        source = Path(__file__).resolve().parent / "shaders"
        target = Path(self.build_lib) / "vkcoop" / "_shaders"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.spv"))


setup(cmdclass={"build_py": BuildPyWithShaders})
