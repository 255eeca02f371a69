"""How llama-cpp-python is built for the local model: portable, and only what we use.

    python3 src/workingmem/llm/_build.py     # prints LLAMA_CPP_VERSION=... CMAKE_ARGS=... for sh

pip builds llama-cpp-python from source, and llama.cpp's default is ``-march=native``: every
instruction the build machine's CPU *advertises*, AMX and AVX-512 included. A virtual machine
may advertise instructions it does not honour (AMX's ``ldtilecfg`` faults), and a wheel built
on one machine may be copied to another, so we build for the x86-64 baseline every machine of
this kind has (SSE4.2, AVX, AVX2, FMA, F16C, BMI2) and nothing beyond it: no AMX, no AVX-512.
On the 135M model that costs nothing measurable. The multimodal library (mtmd), llama.cpp's
tests, examples, tools and server are not built: nothing of ours loads them.

This file has no imports of the package, so ``scripts/install`` runs it before the package is
installed: one place for the flags.
"""

from __future__ import annotations

__all__ = ["LLAMA_CPP_VERSION", "PORTABLE_CMAKE_ARGS", "REBUILD_COMMAND"]

LLAMA_CPP_VERSION = "0.3.36"
"""The llama-cpp-python release the local model is tested with."""

PORTABLE_CMAKE_ARGS = " ".join(
    (
        "-DGGML_NATIVE=OFF",  # the baseline below, not whatever this CPU advertises
        "-DGGML_AVX=ON",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
        "-DGGML_BMI2=ON",
        "-DGGML_AVX512=OFF",
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AMX_BF16=OFF",
        "-DLLAVA_BUILD=OFF",  # the multimodal library
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_TOOLS=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
    )
)
"""The CMake flags of a portable CPU build of llama.cpp with only the library we load."""

REBUILD_COMMAND = (
    f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir '
    f"--no-deps 'llama-cpp-python=={LLAMA_CPP_VERSION}'"
)
"""What replaces an installed llama-cpp-python by the portable build (a few minutes)."""


if __name__ == "__main__":  # pragma: no cover - run by scripts/install
    print(f"LLAMA_CPP_VERSION='{LLAMA_CPP_VERSION}'")
    print(f"CMAKE_ARGS='{PORTABLE_CMAKE_ARGS}'")
