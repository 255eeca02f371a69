"""Other APIs' conversation formats and their chat views: pure conversions, no I/O.

A turn stored from another format keeps its original (`NativeItem.item`) beside an OpenAI
chat-format view that token counts, units and windows use; these modules make the view and
give the originals back.
"""
