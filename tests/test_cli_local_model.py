"""Another local GGUF: ``serve`` and ``demo`` take ``--local-model PATH`` (or
``$WORKINGMEM_LOCAL_MODEL``) and ``--local-model-sha256 HEX`` (or its variable; a flag wins).
The file is checked before anything starts: a missing file, one that is not a GGUF or has
another SHA-256 is one line and exit code 2. The gateway then counts with that file's
vocabulary and plans with its own context, at most the worker's.

"Another" file is a copy of SmolLM2's under another name (its SHA-256 is known); no server is
started (``uvicorn.run`` is replaced) and no model runs.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from tests.llm.local_model import require_local_model
from workingmem.cli import app
from workingmem.embedded import (
    LOCAL_CONTEXT_WINDOW,
    LOCAL_MODEL_ENV,
    LOCAL_MODEL_SHA256_ENV,
    choose_upstream,
    local_model_file,
)
from workingmem.llm._gguf import gguf_tokenizer
from workingmem.llm._weights import LOCAL_MODEL_SHA256, LocalModelUnavailableError
from workingmem.service import ServiceSettings, create_app
from workingmem.tokens import tokenizer_for

runner = CliRunner()
WIDE = {"COLUMNS": "1000"}
"""A terminal wide enough that a one-line reason stays on one line."""
WRONG = "0" * 64


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's file copied under another name, as a user's own GGUF would be."""
    require_local_model()
    from workingmem.llm._weights import local_model_path

    copy = tmp_path_factory.mktemp("models") / "another-model.gguf"
    shutil.copyfile(local_model_path(), copy)
    return copy


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No upstream configured (the local model answers), and no local model in the env."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", LOCAL_MODEL_ENV, LOCAL_MODEL_SHA256_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The apps serve would have run."""
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: apps.append(app))
    return apps


def _error_line(output: str) -> str:
    [line] = [line for line in output.splitlines() if line.startswith("error:")]
    return line


def test_serve_takes_another_gguf_with_its_sha256(
    other_model: Path, tmp_path: Path, local_only: None, served: list[Any]
) -> None:
    options = ["--local-model", str(other_model), "--local-model-sha256", LOCAL_MODEL_SHA256]
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), *options], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "the local model another-model.gguf answers" in result.output
    settings = served[0].state.settings
    assert settings.local_model_path == str(other_model.resolve())
    assert settings.local_model_sha256 == LOCAL_MODEL_SHA256


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_wrong_sha256_exits_2_with_the_reason_in_one_line(
    command: str, other_model: Path, tmp_path: Path, local_only: None, served: list[Any]
) -> None:
    options = ["--local-model", str(other_model), "--local-model-sha256", WRONG]
    result = runner.invoke(app, [command, "--db", str(tmp_path / "m.db"), *options], env=WIDE)
    assert result.exit_code == 2, result.output
    line = _error_line(result.output)
    assert f"has SHA-256 {LOCAL_MODEL_SHA256}, expected {WRONG}" in line
    assert "Traceback" not in result.output
    assert "Answering with" not in result.output  # the demo never started
    assert served == []


@pytest.mark.parametrize(
    ("name", "options", "reason"),
    [
        pytest.param(
            "missing", ["--local-model", "{tmp}/gone.gguf"], "no GGUF file at", id="missing"
        ),
        pytest.param(
            "not-gguf", ["--local-model", "{tmp}/notes.gguf"], "is not a GGUF file", id="not-gguf"
        ),
        pytest.param(
            "bad-hex",
            ["--local-model", "{tmp}/notes.gguf", "--local-model-sha256", "abc"],
            "is not a SHA-256",
            id="bad-hex",
        ),
        pytest.param(
            "hash-alone", ["--local-model-sha256", WRONG], "needs --local-model", id="hash-alone"
        ),
    ],
)
def test_a_file_that_cannot_be_the_local_model_exits_2_before_serving(
    name: str, options: list[str], reason: str, tmp_path: Path, local_only: None, served: list[Any]
) -> None:
    (tmp_path / "notes.gguf").write_text("not a model", encoding="utf-8")
    given = [option.format(tmp=tmp_path) for option in options]
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), *given], env=WIDE)
    assert result.exit_code == 2, result.output
    assert reason in _error_line(result.output)
    assert served == []


def test_the_environment_names_the_file_and_a_flag_wins(
    other_model: Path,
    tmp_path: Path,
    local_only: None,
    served: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = ["serve", "--db", str(tmp_path / "m.db")]
    monkeypatch.setenv(LOCAL_MODEL_ENV, str(tmp_path / "gone.gguf"))
    read = runner.invoke(app, db, env=WIDE)
    assert read.exit_code == 2
    assert f"no GGUF file at {str(tmp_path / 'gone.gguf')!r}" in _error_line(read.output)

    flag = runner.invoke(app, [*db, "--local-model", str(other_model)], env=WIDE)
    assert flag.exit_code == 0, flag.output
    assert served[-1].state.settings.local_model_path == str(other_model.resolve())

    monkeypatch.setenv(LOCAL_MODEL_ENV, str(other_model))
    monkeypatch.setenv(LOCAL_MODEL_SHA256_ENV, WRONG)
    wrong = runner.invoke(app, db, env=WIDE)
    assert wrong.exit_code == 2
    assert f"expected {WRONG}" in _error_line(wrong.output)
    monkeypatch.setenv(LOCAL_MODEL_SHA256_ENV, LOCAL_MODEL_SHA256)
    assert runner.invoke(app, db, env=WIDE).exit_code == 0
    assert served[-1].state.settings.local_model_sha256 == LOCAL_MODEL_SHA256


def test_with_an_upstream_the_local_model_option_is_not_used(
    tmp_path: Path, served: list[Any]
) -> None:
    """The upstream answers, so the file is neither checked nor loaded: it is said unused."""
    options = ["--upstream", "http://127.0.0.1:9/v1", "--local-model", str(tmp_path / "x.gguf")]
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), *options], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "Not using --local-model" in result.output
    assert served[0].state.settings.local_model_path is None


def test_serve_with_workers_still_refuses_another_local_model(
    other_model: Path, tmp_path: Path, local_only: None, served: list[Any]
) -> None:
    options = ["--local-model", str(other_model), "--workers", "2"]
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), *options], env=WIDE)
    assert result.exit_code == 2
    assert "--workers 2 needs an upstream" in result.output
    assert served == []


def test_without_llama_cpp_another_model_says_what_to_install(
    tmp_path: Path, local_only: None, served: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # find_spec: not installed
    options = ["--local-model", str(tmp_path / "any.gguf")]
    result = runner.invoke(app, ["serve", "--db", str(tmp_path / "m.db"), *options], env=WIDE)
    assert result.exit_code == 1
    assert "pip install 'workingmem[local]'" in _error_line(result.output)
    assert served == []


def test_the_settings_read_the_local_model_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(LOCAL_MODEL_ENV, "/models/a.gguf")
    monkeypatch.setenv(LOCAL_MODEL_SHA256_ENV, WRONG)
    from_env = ServiceSettings.from_env()
    assert (from_env.local_model_path, from_env.local_model_sha256) == ("/models/a.gguf", WRONG)
    given = ServiceSettings(local_model_path="/models/b.gguf")
    monkeypatch.setenv("WORKINGMEM_SERVICE_SETTINGS", given.to_json())
    kept = ServiceSettings.from_env()  # the file and its hash go together: the env's is not
    assert (kept.local_model_path, kept.local_model_sha256) == ("/models/b.gguf", None)


def test_the_gateway_plans_with_the_files_vocabulary_and_context(
    other_model: Path, local_only: None
) -> None:
    upstream = choose_upstream(local_model=other_model, local_model_sha256=LOCAL_MODEL_SHA256)
    try:
        assert upstream.local
        assert "another-model.gguf" in upstream.description
        config = upstream.config
        assert config.fixed_model == config.default_model == config.cheap_model == "another-model"
        model = config.model_info("another-model")
        assert model.context_window == 8_192  # SmolLM2's own, which the worker's caps
        assert tokenizer_for(model).key == f"gguf:{LOCAL_MODEL_SHA256}"
        client: Any = upstream.client
        assert (client.model_path, client.n_ctx) == (other_model.resolve(), 8_192)
        assert client.worker_pid is None  # nothing loaded the model
    finally:
        asyncio.run(upstream.aclose())


@pytest.mark.parametrize(
    ("trained", "window"),
    [
        pytest.param(32_768, LOCAL_CONTEXT_WINDOW, id="capped-at-the-workers"),
        pytest.param(2_048, 2_048, id="its-own"),
        pytest.param(None, LOCAL_CONTEXT_WINDOW, id="unsaid"),
    ],
)
def test_the_context_is_the_files_own_at_most_the_workers(
    trained: int | None, window: int, other_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_tokenizer(str(other_model)), "context_length", trained)
    chosen = local_model_file(other_model)
    assert chosen.context_window == chosen.config.model_info(chosen.model_id).context_window
    assert chosen.context_window == window


def test_a_context_too_small_for_the_worker_is_refused(
    other_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gguf_tokenizer(str(other_model)), "context_length", 128)
    with pytest.raises(LocalModelUnavailableError, match="context of 128 tokens"):
        local_model_file(other_model)


def test_the_server_starts_on_the_file_its_settings_name(
    other_model: Path, tmp_path: Path, local_only: None
) -> None:
    """What serve hands the app reaches the gateway the lifespan builds."""
    from fastapi.testclient import TestClient

    settings = ServiceSettings(
        database_url=str(tmp_path / "m.db"),
        local_model_path=str(other_model),
        local_model_sha256=LOCAL_MODEL_SHA256,
    )
    service = create_app(settings)
    with TestClient(service):
        gateway = service.state.services.gateway
        assert gateway.config.fixed_model == "another-model"
    wrong = create_app(
        ServiceSettings(
            database_url=str(tmp_path / "m.db"),
            local_model_path=str(other_model),
            local_model_sha256=WRONG,
        )
    )
    with pytest.raises(LocalModelUnavailableError, match="expected 0000"), TestClient(wrong):
        pass
