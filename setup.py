"""Build script for the optional C accelerators `kafkalite.records._speedups`, `kafkalite.records._columns`
and `kafkalite.schemas._framing` (everything else is in pyproject.toml); a failed compile is skipped and
the pure-Python fallback is used.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalite.records._speedups",
            sources=["src/kafkalite/records/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        # the Spark source's record -> Arrow column decoder (issue 32); Python twin is the fallback
        Extension(
            "kafkalite.records._columns",
            sources=["src/kafkalite/records/_columns.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        # produce validation's record walk (issue 33); the Python twin is the fallback
        Extension(
            "kafkalite.schemas._framing",
            sources=["src/kafkalite/schemas/_framing.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
