"""A backend for the anthropic SDK's memory tool (``memory_20250818``), kept in workingmem.

    from workingmem.integrations.anthropic_memory import AsyncAnthropicMemoryTool

    memory = AsyncAnthropicMemoryTool(store=store, tenant_id="acme", user_id="ada")
    runner = client.beta.messages.tool_runner(model=..., max_tokens=1024, tools=[memory],
                                              messages=[...])

Claude's native memory tool reads and writes files under ``/memories``; the SDK's own backend
keeps them on one machine's disk. This one keeps a user's whole ``/memories`` tree as one
working-memory document of the store (SQLite or PostgreSQL): per tenant and user, every change a
new version (the history rolls back), a cap on the total size, and a compare-and-set on the
version so that two writers never lose each other's files. The tenant and the user come from the
application; the model's input names only paths, and a path outside ``/memories`` (``..``,
encoded or not, a backslash, an empty segment, a control character) is refused, nothing
changed. Needs the ``anthropic`` extra.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections.abc import Awaitable, Callable
from functools import cached_property
from typing import TypeVar

try:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the memory tool's backend needs the anthropic extra: pip install 'workingmem[anthropic]'"
    ) from exc

from ..errors import ConflictError, ValidationError
from ..messages import check_id
from ..stores.documents import (
    DEFAULT_KEEP_VERSIONS,
    MEMORY_FILES_PREFIX,
    DocumentStore,
    check_keep_versions,
)
from ._loop import HomeLoop

__all__ = ["DEFAULT_MAX_CHARS", "ROOT", "AnthropicMemoryTool", "AsyncAnthropicMemoryTool"]

ROOT = "/memories"
DEFAULT_MAX_CHARS = 100_000
"""The cap on the characters of all of a user's files together (about 25,000 tokens)."""
_ATTEMPTS = 10
_UNSAFE = re.compile(r"[\x00-\x1f\x7f\\%]")
_WIDTH = 6

T = TypeVar("T")
Files = dict[str, str]


class MemoryFiles:
    """One user's ``/memories`` tree in one versioned document: the commands, async."""

    def __init__(
        self,
        *,
        store: DocumentStore,
        tenant_id: str,
        user_id: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
    ) -> None:
        self.store = store
        self.tenant_id = check_id("tenant_id", tenant_id)
        self.owner_id = MEMORY_FILES_PREFIX + check_id("user_id", user_id)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValidationError("max_chars", f"must be a positive int, got {max_chars!r}")
        check_keep_versions(keep_versions)
        self.max_chars = max_chars
        self.keep_versions = keep_versions

    # -- the commands ----------------------------------------------------------------------

    async def view(self, path: str, view_range: list[int] | None = None) -> str:
        target = _checked(path)
        files, _ = await self._read()
        if target in files:
            return _numbered(target, files[target], view_range)
        inside = _inside(files, target)
        if target != ROOT and not inside:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        lines = [f"{_size(sum(len(files[f]) for f in inside))}\t{target}"]
        for entry in _listing(inside, target):
            lines.append(f"{_size(_entry_size(files, entry))}\t{entry}")
        return (
            f"Here're the files and directories up to 2 levels deep in {target}, excluding "
            "hidden items:\n" + "\n".join(lines)
        )

    async def create(self, path: str, text: str) -> str:
        target = _checked(path, file=True)

        def change(files: Files) -> Files:
            if target in files:
                raise ToolError(f"File {path} already exists")
            if _inside(files, target):
                raise ToolError(f"The path {path} is a directory")
            _no_file_on_the_way(files, target)
            return {**files, target: text}

        await self._change(change)
        return f"File created successfully at: {path}"

    async def str_replace(self, path: str, old: str, new: str) -> str:
        target = _checked(path, file=True)
        edited_line = [1]

        def change(files: Files) -> Files:
            content = _file(files, target, path)
            count = content.count(old) if old else 0
            if count != 1:
                where = "did not appear verbatim in" if count == 0 else f"appears {count} times in"
                raise ToolError(
                    f"No replacement was performed: old_str `{old}` {where} {path}; it must "
                    "appear exactly once."
                )
            edited_line[0] = content[: content.find(old)].count("\n") + 1
            return {**files, target: content.replace(old, new, 1)}

        files = await self._change(change)
        line = edited_line[0]
        snippet = _numbered(target, files[target], [max(1, line - 2), line + 2], header=False)
        return "The memory file has been edited. The lines around the change:\n" + snippet

    async def insert(self, path: str, line: int, text: str) -> str:
        target = _checked(path, file=True)

        def change(files: Files) -> Files:
            lines = _file(files, target, path).split("\n")
            if isinstance(line, bool) or not isinstance(line, int) or not 0 <= line <= len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {line}. It should be within the range "
                    f"[0, {len(lines)}]."
                )
            lines[line:line] = text.rstrip("\n").split("\n")
            return {**files, target: "\n".join(lines)}

        await self._change(change)
        return f"The file {path} has been edited."

    async def delete(self, path: str) -> str:
        target = _checked(path)
        if target == ROOT:
            raise ToolError("Cannot delete the /memories directory itself")

        def change(files: Files) -> Files:
            gone = {target} if target in files else set(_inside(files, target))
            if not gone:
                raise ToolError(f"The path {path} does not exist")
            return {name: text for name, text in files.items() if name not in gone}

        await self._change(change)
        return f"Successfully deleted {path}"

    async def rename(self, old_path: str, new_path: str) -> str:
        old, new = _checked(old_path), _checked(new_path, file=True)
        if old == ROOT:
            raise ToolError("Cannot rename the /memories directory itself")

        def change(files: Files) -> Files:
            if new in files or _inside(files, new):
                raise ToolError(f"The destination {new_path} already exists")
            if old in files:
                moved = {old: new}
            else:
                moved = {name: new + name[len(old) :] for name in _inside(files, old)}
                if not moved:
                    raise ToolError(f"The path {old_path} does not exist")
                if new.startswith(old + "/"):
                    raise ToolError(f"Cannot move {old_path} into itself")
            renamed = {moved.get(name, name): text for name, text in files.items()}
            for name in moved.values():
                _no_file_on_the_way(renamed, name)
            return renamed

        await self._change(change)
        return f"Successfully renamed {old_path} to {new_path}"

    async def clear(self) -> str:
        await self._change(lambda files: {})
        return "All memory cleared"

    # -- the document ----------------------------------------------------------------------

    async def _read(self) -> tuple[Files, int]:
        document = await self.store.get_document(
            tenant_id=self.tenant_id, scope="user", owner_id=self.owner_id
        )
        if document.content is None:
            return {}, document.version
        try:
            files = json.loads(document.content)["files"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ToolError(
                "The stored memory is not a tree of files; nothing was changed"
            ) from exc
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ToolError("The stored memory is not a tree of files; nothing was changed")
        return files, document.version

    async def _change(self, change: Callable[[Files], Files]) -> Files:
        """Applies `change` to the tree and stores it as a new version; a lost race re-reads
        and re-applies, so a concurrent writer's files stay."""
        for attempt in range(_ATTEMPTS):
            files, version = await self._read()
            changed = change(files)
            size = sum(len(text) for text in changed.values())
            if size > self.max_chars:
                raise ToolError(
                    f"The memory would hold {size} characters; the limit is {self.max_chars}. "
                    "Nothing was changed: shorten or delete files first."
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
                    keep_versions=self.keep_versions,
                )
            except ConflictError:
                await asyncio.sleep(random.uniform(0, 0.005 * (attempt + 1)))
                continue
            return changed
        raise ToolError("The memory kept changing while this command was applied; try again")


class _OverTheStore:
    """What both tools are made of: a user's `MemoryFiles` (and the SDK's cache control)."""

    def __init__(
        self,
        *,
        store: DocumentStore,
        tenant_id: str,
        user_id: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        keep_versions: int = DEFAULT_KEEP_VERSIONS,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        # cooperative: next in the MRO is the SDK's tool base, which takes the cache control
        super().__init__(cache_control=cache_control)  # type: ignore[call-arg]
        self.files = MemoryFiles(
            store=store,
            tenant_id=tenant_id,
            user_id=user_id,
            max_chars=max_chars,
            keep_versions=keep_versions,
        )


class AsyncAnthropicMemoryTool(_OverTheStore, BetaAsyncAbstractMemoryTool):
    """The memory tool for `AsyncAnthropic`'s tool runner, over a `DocumentStore`."""

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self.files.view(command.path, command.view_range)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self.files.create(command.path, command.file_text)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self.files.str_replace(command.path, command.old_str, command.new_str)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self.files.insert(command.path, command.insert_line, command.insert_text)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self.files.delete(command.path)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self.files.rename(command.old_path, command.new_path)

    async def clear_all_memory(self) -> str:
        return await self.files.clear()


class AnthropicMemoryTool(_OverTheStore, BetaAbstractMemoryTool):
    """The memory tool for the sync `Anthropic` client's tool runner. The store's work runs on
    the loop it lives on (`HomeLoop`): a store the application opened on a loop that is still
    running, or any SQLite store."""

    @cached_property
    def _loop(self) -> HomeLoop:
        return HomeLoop(private=False)

    def _run(self, work: Callable[[], Awaitable[T]]) -> T:
        return self._loop.run_sync(work)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(lambda: self.files.view(command.path, command.view_range))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(lambda: self.files.create(command.path, command.file_text))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(
            lambda: self.files.str_replace(command.path, command.old_str, command.new_str)
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(
            lambda: self.files.insert(command.path, command.insert_line, command.insert_text)
        )

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(lambda: self.files.delete(command.path))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(lambda: self.files.rename(command.old_path, command.new_path))

    def clear_all_memory(self) -> str:
        return self._run(self.files.clear)


# -- paths and listings ----------------------------------------------------------------------


def _checked(path: object, *, file: bool = False) -> str:
    """`path` when it names /memories or a place inside it, else ToolError; nothing is
    normalised, since a path that needs it is the model trying something."""
    if not isinstance(path, str):
        raise ToolError(f"The path must be a string, got {type(path).__name__}")
    if _UNSAFE.search(path):
        raise ToolError(f"The path {path!r} has a character memory paths may not have")
    if path.rstrip("/") == ROOT:
        if file:
            raise ToolError(f"The path {path} is the /memories directory, not a file")
        return ROOT
    if not path.startswith(ROOT + "/"):
        raise ToolError(f"Path must start with {ROOT}, got: {path}")
    segments = path[len(ROOT) + 1 :].split("/")
    if path.endswith("/") and not file:
        segments = segments[:-1]
    if any(segment in ("", ".", "..") for segment in segments):
        raise ToolError(f"Path {path} would escape {ROOT} or has an empty part")
    return ROOT + "/" + "/".join(segments)


def _inside(files: Files, directory: str) -> list[str]:
    prefix = directory.rstrip("/") + "/"
    return sorted(name for name in files if name.startswith(prefix))


def _no_file_on_the_way(files: Files, target: str) -> None:
    parts = target.split("/")
    for end in range(3, len(parts)):
        parent = "/".join(parts[:end])
        if parent in files:
            raise ToolError(f"{parent} is a file, so {target} cannot be made inside it")


def _listing(inside: list[str], directory: str) -> list[str]:
    """The files and directories up to two levels below `directory`, directories with a /."""
    entries: set[str] = set()
    for name in inside:
        parts = name[len(directory) + 1 :].split("/")
        for depth in range(1, min(len(parts), 2) + 1):
            entry = directory + "/" + "/".join(parts[:depth])
            entries.add(entry if depth == len(parts) else entry + "/")
    return sorted(entries)


def _entry_size(files: Files, entry: str) -> int:
    if not entry.endswith("/"):
        return len(files[entry])
    return sum(len(files[name]) for name in _inside(files, entry))


def _size(chars: int) -> str:
    return f"{chars}B" if chars < 1024 else f"{chars / 1024:.1f}K"


def _file(files: Files, target: str, path: str) -> str:
    if target not in files:
        kind = "is not a file" if _inside(files, target) else "does not exist"
        raise ToolError(f"The path {path} {kind}. Please provide a valid path.")
    return files[target]


def _numbered(path: str, content: str, view_range: list[int] | None, *, header: bool = True) -> str:
    lines = content.split("\n")
    start, end = 1, len(lines)
    if view_range is not None:
        if len(view_range) != 2 or not all(isinstance(n, int) for n in view_range):
            raise ToolError("view_range must be two line numbers: [first, last] (last -1: the end)")
        start = max(1, view_range[0])
        end = len(lines) if view_range[1] == -1 else min(len(lines), view_range[1])
    shown = [f"{str(n).rjust(_WIDTH)}\t{lines[n - 1]}" for n in range(start, end + 1)]
    head = f"Here's the content of {path} with line numbers:\n" if header else ""
    return head + "\n".join(shown)
