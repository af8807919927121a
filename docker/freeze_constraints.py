"""Print docker/constraints.txt: the exact versions of mirror's runtime dependencies installed here.

`make docker-constraints` runs it in the project's virtualenv (the one CI tests), so the image installs
what the tests ran against. Extras of dependencies are not followed: the image needs none.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, distribution

HEADER = """\
# The exact versions the image installs: mirror's runtime dependencies as tested when frozen.
# tests/unit/test_deployment_files.py checks that they cover every runtime dependency and fit
# pyproject.toml's ranges; regenerate with `make docker-constraints` after changing those."""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_closure(root: str) -> dict[str, str]:
    """name -> installed version of every distribution `root` needs at run time, `root` excluded."""
    found: dict[str, str] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        if normalized(name) in found:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue  # a dependency for another platform or Python version
        found[normalized(name)] = dist.version
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                match = re.match(r"[A-Za-z0-9_.\-]+", requirement)
                if match:
                    pending.append(match.group(0))
    del found[normalized(root)]
    return found


if __name__ == "__main__":
    print(HEADER)
    for name, version in sorted(runtime_closure("mirror").items()):
        print(f"{name}=={version}")
