"""A Responses ``tool_search`` the server runs, run by the gateway inside the ask
(`workingmem.served_tools`): the OpenAI Agents SDK's `ToolSearchTool()` over tools marked
``defer_loading`` (`formats.tool_search` says what the model is offered and what a call loads).

    search = ServerToolSearch.of(tools, loaded, offered)  # None without such a search
    result = await gateway.ask(..., served=search)
    output = [*search.items, *answer_items]  # the search's items come first

A call of it is answered at once: the thread stores a ``tool_search_call`` and its
``tool_search_output`` (``execution: "server"``, the tools found), the response shows them
before the answer, and the model is asked again, offered the tools found. A client that
resends the history (the Agents SDK's way) sends both items back: its next requests offer the
tools they loaded, as a client search's (`ResponseInputRequest.loaded_tools`); one that continues
the response (``previous_response_id``) is offered them too (`StoredResponse.carried_tools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..formats import parsed_arguments
from ..formats.client_tools import TOOL_SEARCH, Loaded, Offered, offer
from ..formats.responses import turns_of
from ..formats.responses_chat import new_id, output_items
from ..formats.tool_search import Catalog, is_server_search
from ..served_tools import ServedRound

__all__ = ["ServerToolSearch"]


class ServerToolSearch:
    """The request's server-run tool search, and the items its rounds made."""

    def __init__(
        self, tools: list[dict[str, Any]], loaded: list[Loaded], offered: dict[str, Offered]
    ) -> None:
        self._tools = tools
        self._loaded = loaded
        self._offered = offered
        self._catalog = Catalog.of(tools)
        self.items: list[dict[str, Any]] = []
        """The items its rounds made, in order: what the response shows before the answer."""

    @classmethod
    def of(
        cls, tools: list[dict[str, Any]], loaded: list[Loaded], offered: dict[str, Offered]
    ) -> ServerToolSearch | None:
        """The search the server runs among the request's `tools`; None when it has none.
        `loaded` (the tools loaded before the request) and `offered` (the calls to read back
        in the client's words) learn the tools each round loads."""
        if not any(is_server_search(tool) for tool in tools):
            return None
        return cls(tools, loaded, offered)

    def serves(self, name: str) -> bool:
        return name == TOOL_SEARCH

    def run(self, calls: Sequence[dict[str, Any]], *, text: str) -> ServedRound:
        """Each call's ``tool_search_call`` and ``tool_search_output`` (after what the model
        said with them), and the tools as offered from now on."""
        said = (
            output_items({"role": "assistant", "content": text}, message_id=new_id("msg"))
            if text
            else []
        )
        outputs: list[dict[str, Any]] = []
        for call in calls:
            arguments = parsed_arguments(str(call["function"].get("arguments") or ""))
            found = self._catalog.find(arguments)
            done = {"call_id": call["id"], "execution": "server", "status": "completed"}
            said.append(
                {"id": new_id("tsc"), "type": "tool_search_call", **done, "arguments": arguments}
            )
            outputs.append(
                {"id": new_id("tso"), "type": "tool_search_output", **done, "tools": found}
            )
            self._loaded.append(Loaded("", found))
        tools, offered = offer(self._tools, loaded=self._loaded)
        self._offered.update(offered)
        items = [*said, *outputs]
        self.items += items
        return ServedRound(turns=list(turns_of(items)), tools=tools)
