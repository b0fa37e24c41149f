"""The harness's suffix-less scripts (audit/run, faults/run) and scripts/'s
hyphenated ones, loaded as modules for their tests."""

import importlib.machinery
import importlib.util
from types import ModuleType


def load_script(path: str, name: str) -> ModuleType:
    """The script at `path` as a module called `name`: its definitions run,
    its `if __name__ == "__main__"` block does not."""
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(name, loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
