"""The estimate used when a model's own tokenizer is unknown: four characters a token.

    ESTIMATE.count_text("abcdefghi")  # 3 == ceil(9 / 4)

Used for model ids tiktoken does not know (``claude-3-5-sonnet``, ``llama3``, ...) unless
`ModelInfo.tokenizer` names an exact one. Four characters a token is the usual rule of thumb
for English with BPE tokenizers; it is not exact (code, digits and non-Latin scripts take more
tokens), which is why `exact` is False and `workingmem.tokens.tokenizer_for` logs a warning.
The chat overhead is OpenAI's (see `workingmem.tokens._chat`).
"""

from __future__ import annotations

from workingmem.tokens._chat import ChatTokenizer

__all__ = ["ESTIMATE", "ESTIMATE_KEY", "EstimateTokenizer"]

ESTIMATE_KEY = "estimate:chars4"
"""The cache key of the estimate; the rule is part of it, so a new rule gets a new key."""

_CHARS_PER_TOKEN = 4


class EstimateTokenizer(ChatTokenizer):
    """Counts ``ceil(len(text) / 4)`` tokens per text, with OpenAI's chat overhead."""

    def __init__(self) -> None:
        super().__init__(key=ESTIMATE_KEY, exact=False)

    def count_text(self, text: str) -> int:
        """``ceil(len(text) / 4)``: the characters (code points), four a token, rounded up."""
        return -(-len(text) // _CHARS_PER_TOKEN)


ESTIMATE = EstimateTokenizer()
"""The one estimate tokenizer; it holds no state worth a second instance."""
