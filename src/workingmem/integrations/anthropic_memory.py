"""A backend for the anthropic SDK's memory tool (``memory_20250818``), kept in workingmem.

    from workingmem.integrations.anthropic_memory import AsyncAnthropicMemoryTool

    memory = AsyncAnthropicMemoryTool(store=store, tenant_id="acme", user_id="ada")
    runner = client.beta.messages.tool_runner(model=..., max_tokens=1024, tools=[memory],
                                              messages=[...])

The SDK's own backend keeps Claude's ``/memories`` files on one machine's disk; this one keeps a
user's whole tree as one working-memory document (owner ``MEMORY_FILES_PREFIX + user_id``,
content ``{"files": {"/memories/notes.md": "text", ...}}``, directories being the prefixes of
file paths): every change a new version (roll back from the history), a cap on the total size,
and a compare-and-set on the version, so that concurrent writers lose no file. The tenant and
the user come from the application, the model names only paths: a path outside ``/memories``
(``..``, encoded or not, ``.``, ``//``, a backslash, a control character) or a malformed command
is a tool error, and changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import unicodedata
import weakref
from collections.abc import Callable
from typing import Annotated

import pydantic

from ._extras import missing_extra

try:
    from anthropic.lib import tools
    from anthropic.lib.tools import ToolError
    from anthropic.types import beta
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("anthropic", "anthropic SDK") from exc

from ..errors import ConflictError, ValidationError
from ..messages import check_id
from ..stores.documents import (
    DEFAULT_KEEP_VERSIONS,
    MEMORY_FILES_PREFIX,
    DocumentReason,
    DocumentStore,
    check_keep_versions,
)
from ._loop import HomeLoop

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MEMORY_FILES_PREFIX",
    "AnthropicMemoryTool",
    "AsyncAnthropicMemoryTool",
]

_ROOT = "/memories"
DEFAULT_MAX_CHARS = 100_000
"""The cap on the characters of all of a user's files together (about 25,000 tokens)."""
_ATTEMPTS = 10
_COMMAND: pydantic.TypeAdapter[beta.BetaMemoryTool20250818Command] = pydantic.TypeAdapter(
    Annotated[beta.BetaMemoryTool20250818Command, pydantic.Field(discriminator="command")]
)

_Files = dict[str, str]
_Turns = weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]


class AsyncAnthropicMemoryTool(tools.BetaAsyncAbstractMemoryTool):
    """The memory tool for `AsyncAnthropic`'s tool runner: one user's ``/memories`` tree in
    one versioned document of a `DocumentStore`."""

    def __init__(
        self,
        *,
        store: DocumentStore,
        tenant_id: str,
        user_id: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
        cache_control: beta.BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.store = store
        self.tenant_id = check_id("tenant_id", tenant_id)
        # the prefixed owner is checked too: an id at the length limit would pass alone
        self.owner_id = check_id("user_id", MEMORY_FILES_PREFIX + check_id("user_id", user_id))
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValidationError("max_chars", f"must be a positive int, got {max_chars!r}")
        check_keep_versions(keep_versions)
        self.max_chars = max_chars
        self.keep_versions = keep_versions
        self._turns: _Turns = weakref.WeakKeyDictionary()

    async def call(self, input: object) -> tools.BetaFunctionToolResultType:
        """The model's input, checked first: the SDK would build the command unchecked."""
        return await self.execute(_command(input))

    async def view(self, command: beta.BetaMemoryTool20250818ViewCommand) -> str:
        target = _checked(command.path)
        files, _ = await self._read()
        if target in files:
            return _numbered(target, files[target], command.view_range)
        inside = _inside(files, target)
        if target != _ROOT and not inside:
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.")
        return (
            f"Here're the files and directories up to 2 levels deep in {target}, excluding "
            "hidden items:\n" + "\n".join(_listing(files, target))
        )

    async def create(self, command: beta.BetaMemoryTool20250818CreateCommand) -> str:
        path, target = command.path, _checked(command.path, file=True)

        def change(files: _Files) -> _Files:
            _vacant(files, target, path)
            return {**files, target: command.file_text}

        await self._change(change)
        return f"File created successfully at: {path}"

    async def str_replace(self, command: beta.BetaMemoryTool20250818StrReplaceCommand) -> str:
        path, target, old = command.path, _checked(command.path, file=True), command.old_str
        edited_line = [1]

        def change(files: _Files) -> _Files:
            content = _file(files, target, path)
            starts = [m.start() for m in re.finditer(re.escape(old), content)] if old else []
            if len(starts) != 1:
                lines = ", ".join(str(content[:n].count("\n") + 1) for n in starts)
                where = f"appears in lines {lines} of" if starts else "did not appear verbatim in"
                raise ToolError(
                    f"No replacement was performed: old_str `{old}` {where} {path}; it must "
                    "appear exactly once."
                )
            edited_line[0] = content[: starts[0]].count("\n") + 1
            return {**files, target: content.replace(old, command.new_str, 1)}

        files = await self._change(change)
        line = edited_line[0]
        snippet = _numbered(target, files[target], [max(1, line - 2), line + 2], header=False)
        return "The memory file has been edited. The lines around the change:\n" + snippet

    async def insert(self, command: beta.BetaMemoryTool20250818InsertCommand) -> str:
        path, target, line = command.path, _checked(command.path, file=True), command.insert_line

        def change(files: _Files) -> _Files:
            lines = _file(files, target, path).split("\n")
            if lines[-1] == "":  # the end of the last line, not a line of its own
                lines.pop()
            if not 0 <= line <= len(lines):
                raise ToolError(f"Invalid `insert_line` {line}: it must be in [0, {len(lines)}].")
            lines[line:line] = command.insert_text.rstrip("\n").split("\n")
            return {**files, target: "\n".join(lines) + "\n"}

        await self._change(change)
        return f"The file {path} has been edited."

    async def delete(self, command: beta.BetaMemoryTool20250818DeleteCommand) -> str:
        path, target = command.path, _checked(command.path)
        if target == _ROOT:
            raise ToolError("Cannot delete the /memories directory itself")

        def change(files: _Files) -> _Files:
            gone = {target} if target in files else set(_inside(files, target))
            if not gone:
                raise ToolError(f"The path {path} does not exist")
            return {name: text for name, text in files.items() if name not in gone}

        await self._change(change)
        return f"Successfully deleted {path}"

    async def rename(self, command: beta.BetaMemoryTool20250818RenameCommand) -> str:
        old_path, new_path = command.old_path, command.new_path
        old, new = _checked(old_path), _checked(new_path, file=True)
        if old == _ROOT:
            raise ToolError("Cannot rename the /memories directory itself")

        def change(files: _Files) -> _Files:
            _vacant(files, new, new_path)
            if old in files:
                moved = {old: new}
            else:
                moved = {name: new + name[len(old) :] for name in _inside(files, old)}
                if not moved:
                    raise ToolError(f"The path {old_path} does not exist")
                if new.startswith(old + "/"):
                    raise ToolError(f"Cannot move {old_path} into itself")
            kept = {name: text for name, text in files.items() if name not in moved}
            for name in moved.values():
                _vacant(kept, name, new_path)
            return {**kept, **{moved[name]: files[name] for name in moved}}

        await self._change(change)
        return f"Successfully renamed {old_path} to {new_path}"

    async def clear_all_memory(self) -> str:
        """An empty tree as a new version (the history keeps what was there)."""
        await self._change(lambda files: {}, reason="clear")
        return "All memory cleared"

    # -- the document ----------------------------------------------------------------------

    async def _read(self) -> tuple[_Files, int]:
        document = await self.store.get_document(
            tenant_id=self.tenant_id, scope="user", owner_id=self.owner_id
        )
        if document.content is None:
            return {}, document.version
        try:  # someone else's content, or a path this module would refuse: not ours to read
            files = json.loads(document.content)["files"]
            if all(isinstance(t, str) and _checked(n, file=True) == n for n, t in files.items()):
                return files, document.version
        except (ValueError, KeyError, TypeError, AttributeError, ToolError):
            pass
        raise ToolError("The stored memory is not a tree of files; nothing was changed")

    async def _change(
        self, change: Callable[[_Files], _Files], *, reason: DocumentReason = "update"
    ) -> _Files:
        """Applies `change` to the tree and stores it as a new version. This tool's own calls
        take turns (a lock per event loop); a race lost to another writer (another tool, a
        process) re-reads and re-applies, so that writer's files stay."""
        async with self._turns.setdefault(asyncio.get_running_loop(), asyncio.Lock()):
            for attempt in range(_ATTEMPTS):
                files, version = await self._read()
                changed = change(files)
                size, before = (sum(map(len, tree.values())) for tree in (changed, files))
                if size > self.max_chars and size > before:  # shrinking is always allowed
                    raise ToolError(
                        f"The memory would hold {size} characters, over its cap of "
                        f"{self.max_chars}. Nothing was changed: shorten or delete files first."
                    )
                if changed == files:
                    return files
                content = json.dumps({"files": changed}, ensure_ascii=False, separators=(",", ":"))
                try:
                    await self.store.put_document(
                        tenant_id=self.tenant_id,
                        scope="user",
                        owner_id=self.owner_id,
                        content=content,
                        expected_version=version,
                        reason=reason,
                        keep_versions=self.keep_versions,
                    )
                except ConflictError:
                    await asyncio.sleep(random.uniform(0, 0.002 * 2**attempt))
                    continue
                return changed
        raise ToolError("The memory kept changing while this command was applied; try again")


class AnthropicMemoryTool(tools.BetaAbstractMemoryTool):
    """The memory tool for the sync `Anthropic` client's tool runner: the async tool run on a
    `HomeLoop` (a loop thread of its own unless a running loop of the application used it
    first: any SQLite store works there, a PostgreSQL pool only on its own loop)."""

    def __init__(
        self,
        *,
        store: DocumentStore,
        tenant_id: str,
        user_id: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
        cache_control: beta.BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.tool = AsyncAnthropicMemoryTool(
            store=store,
            tenant_id=tenant_id,
            user_id=user_id,
            max_chars=max_chars,
            keep_versions=keep_versions,
        )
        self._loop = HomeLoop(private=False)

    def call(self, input: object) -> tools.BetaFunctionToolResultType:
        return self._loop.run_sync(lambda: self.tool.call(input))

    def view(self, command: beta.BetaMemoryTool20250818ViewCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.view(command))

    def create(self, command: beta.BetaMemoryTool20250818CreateCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.create(command))

    def str_replace(self, command: beta.BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.str_replace(command))

    def insert(self, command: beta.BetaMemoryTool20250818InsertCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.insert(command))

    def delete(self, command: beta.BetaMemoryTool20250818DeleteCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.delete(command))

    def rename(self, command: beta.BetaMemoryTool20250818RenameCommand) -> str:
        return self._loop.run_sync(lambda: self.tool.rename(command))

    def clear_all_memory(self) -> str:
        return self._loop.run_sync(self.tool.clear_all_memory)

    def close(self) -> None:
        """Stops the loop thread this tool started for its sync callers, if it started one."""
        self._loop.close()


# -- commands, paths and listings ------------------------------------------------------------


def _command(input: object) -> beta.BetaMemoryTool20250818Command:
    """The model's input as a command, or ToolError saying what is wrong with it."""
    try:
        return _COMMAND.validate_python(input)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(map(str, error["loc"]))
        raise ToolError(f"Invalid memory command ({field or 'input'}): {error['msg']}") from None


def _checked(path: object, *, file: bool = False) -> str:
    """`path` when it names /memories or a place inside it, else ToolError; nothing is
    normalised, since a path that needs it is the model trying something. One trailing slash
    may end a directory's path: the listing prints directories so."""
    if not isinstance(path, str):
        raise ToolError(f"The path must be a string, got {type(path).__name__}")
    if any(c in "\\%" or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in path):
        raise ToolError(f"The path {path!r} has a character memory paths may not have")
    if path in (_ROOT, _ROOT + "/"):
        if file:
            raise ToolError(f"The path {path} is the /memories directory, not a file")
        return _ROOT
    if not path.startswith(_ROOT + "/"):
        raise ToolError(f"Path must start with {_ROOT}, got: {path}")
    segments = path[len(_ROOT) + 1 :].split("/")
    if path.endswith("/") and not file:
        segments = segments[:-1]
    if any(segment in ("", ".", "..") for segment in segments):
        raise ToolError(f"Path {path} would escape {_ROOT} or has an empty part")
    return _ROOT + "/" + "/".join(segments)


def _inside(files: _Files, directory: str) -> list[str]:
    prefix = directory.rstrip("/") + "/"
    return sorted(name for name in files if name.startswith(prefix))


def _vacant(files: _Files, target: str, path: str) -> None:
    """Refuses a new file where a file or a directory is, or under a file."""
    if target in files or _inside(files, target):
        raise ToolError(f"{path} already exists")
    parts = target.split("/")
    for parent in ("/".join(parts[:end]) for end in range(3, len(parts))):
        if parent in files:
            raise ToolError(f"{parent} is a file, so {path} cannot be made inside it")


def _listing(files: _Files, directory: str) -> list[str]:
    """`directory` and what is up to two levels below it, each with its size, directories
    ending in /; hidden ones (a name that starts with a dot) left out, as in the SDK's own."""
    sizes: dict[str, int] = {directory: 0}
    for name in _inside(files, directory):
        sizes[directory] += len(files[name])
        parts = name[len(directory) + 1 :].split("/")
        for depth in range(1, min(len(parts), 2) + 1):
            if parts[depth - 1].startswith("."):
                break
            entry = directory + "/" + "/".join(parts[:depth]) + ("/" if depth < len(parts) else "")
            sizes[entry] = sizes.get(entry, 0) + len(files[name])
    return [f"{_size(size)}\t{entry}" for entry, size in sorted(sizes.items())]


def _size(chars: int) -> str:
    return f"{chars}B" if chars < 1024 else f"{chars / 1024:.1f}K"


def _file(files: _Files, target: str, path: str) -> str:
    if target not in files:
        kind = "is not a file" if _inside(files, target) else "does not exist"
        raise ToolError(f"The path {path} {kind}. Please provide a valid path.")
    return files[target]


def _numbered(path: str, content: str, view_range: list[int] | None, *, header: bool = True) -> str:
    lines = content.split("\n")
    start, end = 1, len(lines)
    if view_range is not None:
        if len(view_range) != 2:
            raise ToolError("view_range must be two line numbers: [first, last] (last -1: the end)")
        start = max(1, view_range[0])
        end = len(lines) if view_range[1] == -1 else min(len(lines), view_range[1])
    shown = [f"{str(n).rjust(6)}\t{lines[n - 1]}" for n in range(start, end + 1)]
    head = f"Here's the content of {path} with line numbers:\n" if header else ""
    return head + "\n".join(shown)
