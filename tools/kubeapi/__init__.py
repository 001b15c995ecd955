"""kubeapi: the test Kubernetes API server (see README.md beside this file)."""

from .server import *  # noqa: F401,F403
from .server import main  # noqa: F401
