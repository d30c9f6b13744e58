"""tools/env_check.py decides what tools/setup_env.sh installs: only requirements this environment
does not satisfy, following -r includes and skipping those whose marker does not apply; so a
second run of the quick start installs nothing."""
import importlib.util
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("env_check", ROOT / "tools" / "env_check.py")
env_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(env_check)


def test_missing_lists_only_what_is_not_satisfied(tmp_path):
    numpy = metadata.version("numpy")
    (tmp_path / "base.txt").write_text(f"# a comment\nnumpy=={numpy}  # pinned\n")
    (tmp_path / "req.txt").write_text(
        "-r base.txt\n"
        "numpy<1\n"                                       # installed, but not this version
        "kael-surely-not-a-package==1.0\n"                # not installed
        "another-absent-package==2; sys_platform == 'no-such-platform'\n"  # marker false: skipped
        "pytest\n")                                       # installed, any version
    assert env_check.missing(tmp_path / "req.txt") == ["numpy<1", "kael-surely-not-a-package==1.0"]


def test_the_project_s_requirements_are_satisfied_here():
    # The environment the tests run in was set up by tools/setup_env.sh from these files.
    assert env_check.missing(ROOT / "requirements-dev.txt") == []
    assert env_check.missing(ROOT / "requirements-build.txt") == []
