"""Other APIs' conversation formats and their chat views: pure conversions, no I/O.

A turn stored from another format keeps its original (`NativeItem.item`) beside an OpenAI
chat-format view that token counts, units and windows use; these modules make the view and
give the originals back.
"""

__all__ = ["ORIGINAL_KEY"]

ORIGINAL_KEY = "workingmem_original"
"""A window's message sent to an upstream that speaks a turn's own format (the Responses API,
Anthropic's Messages) carries that turn as stored under this key (`Turn.in_format`: a
reasoning item's ``encrypted_content``, a thinking block's ``signature``), so that the client
sends it instead of what the chat view would make. Only such a client sees it."""
