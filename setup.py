"""Build script for the optional C accelerators `kafkalite.records._speedups` and `._columns` (everything
else is in pyproject.toml); a failed compile is skipped and the pure-Python fallback is used.
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
        Extension(
            "kafkalite.records._columns",
            sources=["src/kafkalite/records/_columns.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
