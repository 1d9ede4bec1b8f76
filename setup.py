"""Build script for the optional C accelerators `kafkalite.records._speedups` and
`kafkalite.schemas._framing` (everything else is in pyproject.toml); a failed compile is skipped and
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
        # produce validation's record walk (issue 33); the Python twin is the fallback
        Extension(
            "kafkalite.schemas._framing",
            sources=["src/kafkalite/schemas/_framing.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
