"""Counting tokens exactly as the model's own tokenizer does, offline.

    from workingmem.tokens import count_tokens, tokenizer_for

    model = ModelInfo(id="gpt-4o", context_window=128_000)
    count_tokens([{"role": "user", "content": "tiktoken is great!"}], model)  # 3 + 1 + 6 + 3
    tokenizer_for(model).key  # "tiktoken:o200k_base", stored next to each turn's count

OpenAI model ids count with tiktoken (o200k_base, cl100k_base), built from vocabularies that
ship with the package, so counting never downloads. `ModelInfo.tokenizer` can force an
encoding, name a GGUF file whose vocabulary llama.cpp reads (``gguf:<path>``, extra ``local``:
how the local model counts, keyed by the file's SHA-256) or a Hugging Face ``tokenizer.json``
(extra ``hf``); anything else falls back to a documented estimate, with a logged warning.
Text-only messages are counted exactly with the OpenAI cookbook's chat overhead (a GGUF's
with its own chat template's); tool calls, images, files and audio are documented
approximations (see `workingmem.tokens._chat` and `workingmem.tokens._media`).

Modules: ``_protocol`` (the `Tokenizer` protocol), ``_chat`` (the message overhead),
``_tiktoken`` (offline OpenAI encodings), ``_hf`` (Hugging Face), ``_estimate`` (4 characters
a token), ``_select`` (which tokenizer a model gets, and the schemes a layer above registers:
``gguf:``, a GGUF file's vocabulary, counted by `workingmem.llm._gguf` through
llama-cpp-python, which this package never imports).
"""

from __future__ import annotations

from workingmem.tokens._protocol import Tokenizer
from workingmem.tokens._select import (
    GGUF_KEY_PREFIX,
    count_tokens,
    register_scheme,
    tokenizer_for,
    tokenizer_from_key,
)

__all__ = [
    "GGUF_KEY_PREFIX",
    "Tokenizer",
    "count_tokens",
    "register_scheme",
    "tokenizer_for",
    "tokenizer_from_key",
]
