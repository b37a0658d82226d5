"""TokenGate's fleet harness: PostgreSQL, a fake OpenID provider and API, N `tokengate serve`
instances behind nginx, simulated devices, and the invariants a fleet must keep (README.md)."""

from .cluster import Instance, Stack
from .devices import Load
from .invariants import Checks, standard_checks

__all__ = ["Checks", "Instance", "Load", "Stack", "standard_checks"]
