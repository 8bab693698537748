"""Build hook (all other settings are in pyproject.toml): the shipped policies live in
``policies/`` at the repository root (where the docs, tests and summary.json name them) and
go into the wheel as package data, ``rizz/policies/*.yaml``, so a plain ``pip install rizz``
can load them (``rizz.formats.policy_file.POLICY_DIR`` looks there first)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithPolicies(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads policies/ in the checkout
            return
        dest = Path(self.build_lib) / "rizz" / "policies"
        self.mkpath(str(dest))
        for src in sorted(Path("policies").glob("*.yaml")):
            self.copy_file(str(src), str(dest / src.name))


setup(cmdclass={"build_py": BuildWithPolicies})
