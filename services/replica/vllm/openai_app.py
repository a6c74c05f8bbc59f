"""vLLM's own OpenAI server application, built in-process on a replica's engine client.

The replica answers every request with the FastAPI application `vllm serve` runs: the same
routers, request models, validation and exception handlers, chat templates, tool and reasoning
parsers, structured outputs, logprobs and streaming chunks. It is built the way vLLM's API
server builds it (`build_app` + `init_app_state` from a CLI namespace parsed by vLLM's own
argument parser), over `SLOEngineClient` (engine_client.py) instead of the bare `AsyncLLM`, so
slomesh's metadata reaches the engine and the replica can follow each request. The ingress
calls it through ASGI (asgi_call.py); nothing listens on a socket for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from fastapi import FastAPI

    from services.replica.vllm.engine_client import SLOEngineClient


class ServingOptions(BaseModel):
    """Per-model options of vLLM's OpenAI serving layer (its `vllm serve` flags of the same
    names); they live in the model's replica config entry (`ReplicaArgs.serving`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chat_template: str | None = None
    """A Jinja chat template (file path or inline) replacing the tokenizer's; None: the
    tokenizer's own."""
    tool_call_parser: str | None = None
    """vLLM's tool parser for this model (e.g. "hermes", "llama3_json"); None: no tool calls
    are parsed."""
    enable_auto_tool_choice: bool = False
    """Let the model choose tool calls (`tool_choice: "auto"`); needs `tool_call_parser`."""
    reasoning_parser: str | None = None
    """vLLM's reasoning parser (e.g. "deepseek_r1"); None: no reasoning content."""
    response_role: str = "assistant"
    """The role of generated chat messages."""
    return_tokens_as_token_ids: bool = False
    """Logprobs name tokens as "token_id:N" instead of their text."""
    enable_prompt_tokens_details: bool = False
    """Usage carries prompt_tokens_details (cached tokens)."""
    enable_force_include_usage: bool = False
    """Every response carries usage, even when the request did not ask for it."""

    def cli_args(self) -> list[str]:
        """These options as `vllm serve` flags."""
        out: list[str] = ["--response-role", self.response_role]
        for flag, value in (
            ("--chat-template", self.chat_template),
            ("--tool-call-parser", self.tool_call_parser),
            ("--reasoning-parser", self.reasoning_parser),
        ):
            if value is not None:
                out += [flag, value]
        for flag, on in (
            ("--enable-auto-tool-choice", self.enable_auto_tool_choice),
            ("--return-tokens-as-token-ids", self.return_tokens_as_token_ids),
            ("--enable-prompt-tokens-details", self.enable_prompt_tokens_details),
            ("--enable-force-include-usage", self.enable_force_include_usage),
        ):
            if on:
                out.append(flag)
        return out


def server_namespace(model: str, served_model_name: str, options: ServingOptions) -> Any:
    """The namespace `vllm serve MODEL --served-model-name NAME <options>` parses to."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())  # type: ignore[no-untyped-call]
    argv = ["--model", model, "--served-model-name", served_model_name, *options.cli_args()]
    args = parser.parse_args(argv)
    validate_parsed_serve_args(args)
    return args


async def build_openai_app(
    client: SLOEngineClient, model: str, served_model_name: str, options: ServingOptions
) -> FastAPI:
    """vLLM's OpenAI application over `client` (routes, state and exception handlers)."""
    from vllm.entrypoints.launchers.api_server.app_state import init_app_state
    from vllm.entrypoints.launchers.app import build_app

    args = server_namespace(model, served_model_name, options)
    tasks = await client.get_supported_tasks()
    app: FastAPI = build_app(args, tasks, client.model_config)
    drop_socket_middleware(app)
    await init_app_state(client, app.state, args, tasks)  # type: ignore[arg-type]
    return app


SOCKET_MIDDLEWARE = frozenset({"CORSMiddleware", "PrometheusInstrumentatorMiddleware"})
"""Middleware of vLLM's application that serves a socket's clients, not the in-process calls
the replica makes: CORS answers browsers (the ingress passes no `Origin` header on), and the
Prometheus instrumentator counts HTTP requests into a registry nothing scrapes here (the
application has no socket and the ingress forwards no `/metrics`). Each wraps every request and
every streamed piece; the ingress keeps the mesh's own HTTP metrics."""


def drop_socket_middleware(app: Any) -> list[str]:
    """Take SOCKET_MIDDLEWARE out of `app`'s middleware (before it serves: vLLM's build may
    have built the stack already, which is built again without them); the names taken out."""
    names = [getattr(entry.cls, "__name__", "") for entry in app.user_middleware]
    app.user_middleware[:] = [
        entry
        for entry, name in zip(app.user_middleware, names, strict=True)
        if name not in SOCKET_MIDDLEWARE
    ]
    if getattr(app, "middleware_stack", None) is not None:
        app.middleware_stack = app.build_middleware_stack()
    return [name for name in names if name in SOCKET_MIDDLEWARE]
