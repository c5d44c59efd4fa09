"""The compiled core (crates/ipisim-py). Results cross as JSON text."""

__all__ = ["ConfigError", "__version__", "check", "describe", "list_builtins", "run", "run_traced"]
__version__: str

class ConfigError(ValueError):
    """A user mistake in a config file, preset, scenario or --set value."""

def run(
    scenario: str,
    machine: str | None = None,
    kernel: str | None = None,
    sets: list[tuple[str, str]] = ...,
    seed: int = 1,
    max_memory: str | None = None,
) -> tuple[str, int]: ...
def run_traced(
    scenario: str,
    machine: str | None,
    kernel: str | None,
    sets: list[tuple[str, str]],
    seed: int,
    start_s: float,
    end_s: float,
    max_memory: str | None = None,
) -> tuple[str, int, str, str, bool]: ...
def check(
    scenario: str,
    machine: str | None = None,
    kernel: str | None = None,
    sets: list[tuple[str, str]] = ...,
    seed: int = 1,
    max_memory: str | None = None,
) -> None: ...
def list_builtins() -> str: ...
def describe(thing: str) -> str: ...
