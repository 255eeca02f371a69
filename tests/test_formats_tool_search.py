"""What a tool search the server runs can load (`formats.tool_search.Catalog`), and how the
request's tools are offered behind it (`formats.client_tools.offer`)."""

from __future__ import annotations

from typing import Any

import pytest

from workingmem.formats.client_tools import offer
from workingmem.formats.tool_search import Catalog, is_server_search

FIND: Any = {"type": "function", "name": "find_order", "description": "Finds an order."}
CANCEL: Any = {"type": "function", "name": "cancel_order"}
LIST: Any = {"type": "function", "name": "list_customers", "description": "Lists them."}
CRM: Any = {
    "type": "namespace",
    "name": "crm",
    "description": "The shop's customer records.",
    "tools": [
        {**FIND, "defer_loading": True},
        {**CANCEL, "defer_loading": True},
        LIST,  # not deferred: offered at once, not loaded
    ],
}
INVOICE: Any = {"type": "function", "name": "get_invoice", "defer_loading": True}
WEATHER: Any = {"type": "function", "name": "get_weather", "description": "The weather."}
TOOLS: Any = [WEATHER, {"type": "tool_search"}, CRM, INVOICE]
CATALOG = Catalog.of(TOOLS)


def names(found: list[dict[str, Any]]) -> list[str]:
    """The tools found, by chat name."""
    out = []
    for tool in found:
        if tool["type"] == "namespace":
            out += [f"{tool['name']}__{inner['name']}" for inner in tool["tools"]]
        else:
            out.append(tool["name"])
    return out


def test_the_function_lists_what_it_can_load() -> None:
    function = CATALOG.function(None)["function"]
    assert function["name"] == "tool_search"
    assert function["description"].endswith(
        "What it can load:\n"
        "- crm (find_order, cancel_order): The shop's customer records.\n"
        "- get_invoice"
    )
    assert function["parameters"]["required"] == ["paths"]
    own = CATALOG.function("Search the shop's tools.")["function"]["description"]
    assert own.startswith("Search the shop's tools.\n\nWhat it can load:")
    assert (
        "Nothing is left to load."
        in Catalog.of([WEATHER]).function(None)["function"]["description"]
    )


@pytest.mark.parametrize(
    ("arguments", "found"),
    [
        ({"paths": ["crm"]}, ["crm__find_order", "crm__cancel_order"]),
        ({"paths": ["CRM.cancel_order"]}, ["crm__cancel_order"]),
        ({"paths": ["crm__find_order", "crm/find_order"]}, ["crm__find_order"]),
        ({"paths": ["cancel_order"]}, ["crm__cancel_order"]),  # a namespace's tool, bare
        ({"paths": ["get_invoice", "crm.find_order"]}, ["crm__find_order", "get_invoice"]),
        ({"paths": ["customer records"]}, ["crm__find_order", "crm__cancel_order"]),
        ({"paths": ["finds"]}, ["crm__find_order"]),  # a word of a description
        ({"query": "invoice"}, ["get_invoice"]),
        ({"path": "crm.find_order"}, ["crm__find_order"]),
        ("get_invoice", ["get_invoice"]),
        ({"paths": ["list_customers"]}, []),  # offered already: not deferred
        ({"paths": ["crm.nothing"]}, []),
        ({"paths": ["", "!"]}, []),
        ({"paths": [3]}, []),
        ([1, 2], []),
    ],
)
def test_a_call_loads_what_it_names(arguments: object, found: list[str]) -> None:
    assert names(CATALOG.find(arguments)) == found


def test_a_namespace_comes_back_with_the_tools_found_as_given() -> None:
    (found,) = CATALOG.find({"paths": ["crm.find_order"]})
    assert found == {**CRM, "tools": [{**FIND, "defer_loading": True}]}


def test_behind_a_server_search_the_deferred_tools_wait_to_be_loaded() -> None:
    functions, offered = offer(TOOLS)
    chat = [tool["function"]["name"] for tool in functions]
    assert chat == ["get_weather", "tool_search", "crm__list_customers"]
    assert offered["tool_search"].server
    client: Any = {"type": "tool_search", "execution": "client"}
    functions, _ = offer([WEATHER, client, CRM, INVOICE])
    assert [tool["function"]["name"] for tool in functions] == [
        "get_weather",
        "tool_search",
        "crm__find_order",
        "crm__cancel_order",
        "crm__list_customers",
        "get_invoice",
    ]


@pytest.mark.parametrize(
    ("tool", "server"),
    [
        ({"type": "tool_search"}, True),
        ({"type": "tool_search", "execution": "server"}, True),
        ({"type": "tool_search", "execution": "client"}, False),
        ({"type": "function", "name": "tool_search"}, False),
    ],
)
def test_a_search_is_the_server_s_unless_the_client_runs_it(tool: Any, server: bool) -> None:
    assert is_server_search(tool) is server
