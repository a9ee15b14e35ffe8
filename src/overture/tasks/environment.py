"""Per-repository Python environments: built once per repository, recorded with its tasks.

A repository's tests need its dependencies, its test extras and its pytest plugins, none of which
are overture's. `resolve_environment` builds a virtualenv for a repository with `uv`, from the
Python that runs overture: the repository installed with its test extras (`TEST_EXTRAS`, or those
named), its test requirements files (`REQUIREMENT_FILES`), `pytest`, and any packages named. Then
the repository's own code is taken out again, keeping its metadata (`importlib.metadata.version`,
entry points): the code tests import is the sandbox's workspace, put on `sys.path` by a `.pth`
file (`/workspace/src` for a src layout, `/workspace` otherwise), so the repository is importable
whatever its layout, and an edit in the workspace is what the tests see.

What was built is an `EnvironmentRecord`: the Python version, the exact versions of every package
(`uv pip freeze`), the repository's distribution names and its import paths. A task set stores it
(`environments/<snapshot>.json`, named by each task's `environment`), and `ensure_environment`
rebuilds the same environment from it on any machine (`uv pip install --no-deps` of the pinned
list, then the repository's metadata from the task's snapshot). Environments live in a cache
(`OVERTURE_ENVS`, else `$XDG_CACHE_HOME/overture/envs`) under the record's content hash: one per
distinct record, built once (under a lock), shared read-only by every sandbox of that repository
(`overture.sandbox.python_env`). A Python of another version than the running one is an error
that names both; so is a repository uv cannot install (the message is uv's own, its end kept).
Compiled extensions build only where the machine has their compilers and headers. Building runs
the repository's build backend on the host, as `pip install` would: environments are built from a
task set's snapshots (never from a policy's workspace), for repositories one would install.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from overture.sandbox import WORKSPACE_MOUNT
from overture.sandbox.python_env import PythonEnvironment
from overture.tasks.run_failure import output_tail
from overture.tasks.snapshots import store_snapshot
from overture.tasks.spec import Task, TaskError

TEST_EXTRAS = ("test", "tests", "testing")
REQUIREMENT_FILES = (
    "requirements-test.txt", "requirements-tests.txt", "requirements-testing.txt", "test-requirements.txt",
    "requirements/test.txt", "requirements/tests.txt", "requirements/testing.txt", "tests/requirements.txt",
)  # fmt: skip
WORKSPACE_PTH = "_overture_workspace.pth"
RECORD_NAME = "overture-environment.json"  # inside a built environment: it is complete
ENVIRONMENTS = "environments"  # a task set's folder of records, beside `snapshots/`
UV_TIMEOUT_S = 900
PIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*")
RECORD_FORMAT = 1


class RepositoryEnvironmentError(TaskError):
    """An environment that cannot be built or a record that cannot be read; the message says why."""


@dataclass(frozen=True)
class EnvironmentRequest:
    """Build an environment for a repository, with these packages and extras beside what it declares."""

    packages: tuple[str, ...] = ()
    extras: tuple[str, ...] = TEST_EXTRAS


@dataclass(frozen=True)
class EnvironmentRecord:
    """What an environment holds, enough to build it again (see the module docstring)."""

    python: str  # major.minor
    requirements: tuple[str, ...]  # `name==version`, sorted; the repository's own are not among them
    projects: tuple[str, ...] = ()  # distributions installed from the repository (metadata only)
    import_paths: tuple[str, ...] = (".",)  # workspace-relative folders on sys.path
    packages: tuple[str, ...] = field(default=(), compare=False)  # what was asked for beyond the repo

    @property
    def key(self) -> str:
        """A content hash of what the environment holds: its cache name."""
        held = {"python": self.python, "requirements": self.requirements, "projects": self.projects,
                "import_paths": self.import_paths}  # fmt: skip
        return hashlib.sha256(json.dumps(held, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return {"format": RECORD_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: object, where: str) -> EnvironmentRecord:
        """A record from JSON, every field checked: the pins go to `uv pip install` as they are, so
        a line that is not `name==version` (an option such as `--index-url`) is refused."""
        if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
            raise RepositoryEnvironmentError(f"{where}: not an environment record of format {RECORD_FORMAT}")

        def strings(key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
            value = data.get(key, default)
            if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
                raise RepositoryEnvironmentError(f"{where}: {key} must be a list of strings")
            return tuple(value)

        if not isinstance(data.get("python"), str):
            raise RepositoryEnvironmentError(f"{where}: python must be a version string such as '3.11'")
        record = cls(
            data["python"], strings("requirements"), strings("projects", ()), strings("import_paths", (".",)),
            strings("packages", ()),
        )  # fmt: skip
        for pin in record.requirements:
            if not PIN.fullmatch(pin):
                raise RepositoryEnvironmentError(f"{where}: requirement {pin!r} is not name==version")
        for path in record.import_paths:
            if path.startswith("/") or ".." in Path(path).parts:
                raise RepositoryEnvironmentError(f"{where}: import path {path!r} leaves the workspace")
        return record


def write_record(path: Path, record: EnvironmentRecord) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_dict(), indent=1) + "\n")
    return path


def read_record(path: str | Path) -> EnvironmentRecord:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        why = exc.strerror or exc
        raise RepositoryEnvironmentError(f"{path}: environment record not readable: {why}") from None
    except json.JSONDecodeError as exc:
        raise RepositoryEnvironmentError(f"{path}: environment record is not JSON: {exc}") from None
    return EnvironmentRecord.from_dict(data, str(path))


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def interpreter() -> Path:
    """The interpreter environments are made from: the one under overture's own (virtual) env."""
    for name in (f"python{python_version()}", "python3"):
        candidate = Path(sys.base_prefix) / "bin" / name
        if candidate.is_file():
            return candidate.resolve()
    raise RepositoryEnvironmentError(f"no interpreter under {sys.base_prefix}/bin to make environments from")


def environments_root() -> Path:
    configured = os.environ.get("OVERTURE_ENVS")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "overture" / "envs"


def uv(*args: str | Path, cwd: Path | None = None) -> str:
    """Run uv; its stdout, or `RepositoryEnvironmentError` with the end of what it said."""
    from uv import find_uv_bin  # the `uv` package: the binary and where it lies

    command = [find_uv_bin(), *map(str, args)]
    environ = {**os.environ, "UV_NO_PROGRESS": "1", "VIRTUAL_ENV": ""}
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=UV_TIMEOUT_S, env=environ
        )
    except subprocess.TimeoutExpired:
        raise RepositoryEnvironmentError(f"`uv {args[0]} {args[1]}` ran past {UV_TIMEOUT_S}s") from None
    if done.returncode != 0:
        said = output_tail(done.stderr or done.stdout, 1500)
        raise RepositoryEnvironmentError(f"`uv {args[0]} {args[1]}` failed (exit {done.returncode}): {said}")
    return done.stdout


def import_paths(repo: Path) -> tuple[str, ...]:
    """Where the repository's modules are imported from: `src` for a src layout, else the root."""
    src = repo / "src"
    if not src.is_dir():
        return (".",)
    has_module = any(
        (child.is_dir() and (child / "__init__.py").is_file()) or child.suffix == ".py"
        for child in src.iterdir()
        if not child.name.startswith((".", "_"))
    )
    return ("src",) if has_module else (".",)


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (`Python_Dateutil` is `python-dateutil`)."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def installable(repo: Path) -> bool:
    return (repo / "pyproject.toml").is_file() or (repo / "setup.py").is_file()


@contextlib.contextmanager
def source_copy(repo: Path) -> Iterator[Path]:
    """The repository's files (as a snapshot holds them) in a temporary folder, so that building it
    (which writes `build/`, `*.egg-info`) leaves the repository itself untouched."""
    with tempfile.TemporaryDirectory(prefix="overture-env-source-") as folder:
        yield store_snapshot(repo, folder)


def site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{python_version()}" / "site-packages"


def installed_from(prefix: Path, source: Path) -> list[Path]:
    """The dist-info folders of the distributions installed from `source` (their direct URL)."""
    found = []
    for dist_info in site_packages(prefix).glob("*.dist-info"):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            url = json.loads((dist_info / "direct_url.json").read_text())["url"]
            path = Path(unquote(urlparse(url).path)).resolve()
            if path == source.resolve() or path.is_relative_to(source.resolve()):
                found.append(dist_info)
    return found


def keep_metadata_only(prefix: Path, dist_info: Path) -> None:
    """Remove an installed distribution's files (modules, scripts, `.pth`) but its dist-info."""
    site, kept, top = site_packages(prefix), dist_info.resolve(), prefix.resolve()
    emptied: set[Path] = set()
    with contextlib.suppress(OSError):
        for line in (dist_info / "RECORD").read_text().splitlines():
            rel = line.rsplit(",", 2)[0]
            path = Path(os.path.normpath(site / rel))
            if rel and not path.is_relative_to(kept) and path.is_relative_to(top):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                emptied.update(parent for parent in path.parents if parent.is_relative_to(site))
    emptied.discard(site)
    for folder in sorted(emptied, key=lambda folder: -len(folder.parts)):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only those left empty go


def install_repository_metadata(prefix: Path, repo: Path) -> None:
    """Install `repo` without its dependencies, then keep only its metadata."""
    if not installable(repo):
        return
    with source_copy(repo) as copy:
        uv("pip", "install", "--python", prefix / "bin" / "python", "--no-deps", copy)
        dist_infos = installed_from(prefix, copy)
    for dist_info in dist_infos:
        keep_metadata_only(prefix, dist_info)


def finish(prefix: Path, record: EnvironmentRecord) -> None:
    """Put the workspace on `sys.path` and mark the environment complete."""
    lines = [WORKSPACE_MOUNT if path == "." else f"{WORKSPACE_MOUNT}/{path}" for path in record.import_paths]
    (site_packages(prefix) / WORKSPACE_PTH).write_text("\n".join(lines) + "\n")
    (prefix / RECORD_NAME).write_text(json.dumps(record.to_dict(), indent=1) + "\n")


def place(built: Path, record: EnvironmentRecord, name: str) -> Path:
    """Move a built environment to its cache place (another process may have put one there)."""
    final = environments_root() / f"{name}-{record.key}"
    try:
        os.rename(built, final)
    except OSError:
        if not (final / RECORD_NAME).is_file():
            raise
        shutil.rmtree(built, ignore_errors=True)
    return final


def new_venv(name: str) -> Path:
    root = environments_root()
    root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".building-{name}-", dir=root))
    building.chmod(0o755)  # sandboxes run as another user, who reads it
    uv("venv", "--quiet", "--relocatable", "--allow-existing", "--python", interpreter(), building)
    return building


def resolve_environment(
    repo: Path, packages: Sequence[str] = (), extras: Sequence[str] = TEST_EXTRAS, name: str = ""
) -> tuple[EnvironmentRecord, Path]:
    """Build the environment of `repo` from what it declares (the module docstring says what) and
    return its record and where it lies (cached under `name`, the repository's by default)."""
    repo = repo.resolve()
    name = name or repo.name
    building = new_venv(name)
    try:
        python = building / "bin" / "python"
        with source_copy(repo) as copy:
            wanted: list[str] = []
            if installable(repo):
                wanted.append(f"{copy}[{','.join(extras)}]" if extras else str(copy))
            for rel in REQUIREMENT_FILES:
                if (copy / rel).is_file():
                    wanted += ["-r", str(copy / rel)]
            uv("pip", "install", "--python", python, *wanted, "pytest", *packages, cwd=copy)
            projects = installed_from(building, copy)
        frozen = uv("pip", "freeze", "--python", python).splitlines()
        own = {normalized(dist_info.name.split("-", 1)[0]) for dist_info in projects}
        requirements = sorted(
            line.strip() for line in frozen
            if "==" in line and " @ " not in line and normalized(line.split("==", 1)[0]) not in own
        )  # fmt: skip
        for dist_info in projects:
            keep_metadata_only(building, dist_info)
        record = EnvironmentRecord(
            python_version(), tuple(requirements),
            tuple(sorted(dist_info.name.split("-", 1)[0] for dist_info in projects)),
            import_paths(repo), tuple(packages),
        )  # fmt: skip
        finish(building, record)
        return record, place(building, record, name)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def ensure_environment(record: EnvironmentRecord, repo: Path, name: str = "") -> Path:
    """The environment of `record`, built from it (and the repository's metadata from `repo`)
    unless the cache already holds it."""
    if record.python != python_version():
        raise RepositoryEnvironmentError(
            f"the environment was made for Python {record.python}; overture runs Python {python_version()}"
        )
    name = name or repo.resolve().name
    root = environments_root()
    final = root / f"{name}-{record.key}"
    if (final / RECORD_NAME).is_file():
        return final
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}-{record.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / RECORD_NAME).is_file():
            return final
        shutil.rmtree(final, ignore_errors=True)  # an incomplete one, left by a killed build
        building = new_venv(name)
        try:
            if record.requirements:
                pins = building / "requirements.txt"
                pins.write_text("\n".join(record.requirements) + "\n")
                uv("pip", "install", "--python", building / "bin" / "python", "--no-deps", "-r", pins)
                pins.unlink()
            install_repository_metadata(building, repo)
            finish(building, record)
            return place(building, record, name)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise


def as_python(prefix: Path) -> PythonEnvironment:
    """The sandbox's view of a built environment: its prefix, its interpreter, its plugins loading."""
    return PythonEnvironment(str(prefix.resolve()), os.path.realpath(sys.base_prefix), load_plugins=True)


@functools.cache
def _python_of(record_path: str, base: str) -> PythonEnvironment:
    record = read_record(record_path)
    return as_python(ensure_environment(record, Path(base), Path(record_path).stem.rsplit("-", 1)[0]))


def python_for(task: Task) -> PythonEnvironment | None:
    """The Python a task's sandboxes run: its environment's (built on first use), or None for the
    pool's own (a task without one)."""
    if not task.environment:
        return None
    if not task.base:
        raise RepositoryEnvironmentError(f"task {task.instance_id}: an environment but no base to build on")
    return _python_of(task.environment, task.base)


def prepare_environments(tasks: Sequence[Task]) -> int:
    """Build (or find) every environment `tasks` name, before any sandbox needs one; how many."""
    named = {task.environment: task for task in tasks if task.environment}
    for task in named.values():
        python_for(task)
    return len(named)
